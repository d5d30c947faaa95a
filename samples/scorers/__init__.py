"""Two sample scoring APIs that speak the agent's wire contract (``dynamic_scoring.wire``).

* ``samples.scorers.cpu``: scores from the mean CPU load over the window;
* ``samples.scorers.predict``: scores from a least-squares forecast of the load one interval ahead.

They depend on the standard library and ``dynamic_scoring.wire`` only (pydantic), never on the hub
or the agent, so a scorer image needs neither.
"""
