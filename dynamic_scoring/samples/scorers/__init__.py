"""Sample scoring APIs written with the scorer library (``dynamic_scoring.scorer``).

* ``cpu``: scores from the mean CPU load over the window;
* ``predict``: scores from a least-squares forecast of the load ahead;
* ``seasonal``: scores from the load expected over the placement's life, from earlier days;
* ``gpu``: scores free GPU capacity from the NVIDIA DCGM exporter's metrics.

They need only the project's base install (pydantic, httpx), never the hub's or the agent's
dependencies, so a scorer image needs neither.
"""
