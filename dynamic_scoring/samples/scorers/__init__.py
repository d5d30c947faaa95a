"""Two sample scoring APIs written with the scorer library (``dynamic_scoring.scorer``).

* ``dynamic_scoring.samples.scorers.cpu``: scores from the mean CPU load over the window;
* ``dynamic_scoring.samples.scorers.predict``: scores from a least-squares forecast of the load one interval
ahead.

They need only the project's base install (pydantic, httpx), never the hub's or the agent's
dependencies, so a scorer image needs neither.
"""
