"""The placement-quality benchmark: does a Placement that follows live scores place better, and how sure
can we be.

``real`` replays held-out blocks of public traces and ``synthetic`` the trace package's synthetic
samples, through the same parts: the fleet (``fleet``, ``traces``), Prometheus (``prometheus``,
``remote_write``), the scoring policies (``policies``) replayed through real agent cycles (``replay``,
``closed_loop``), Placement's ranking (``ranking``, checked against OCM's controller in
``controller`` and ``closed_controller``), and the judging (``experiment``, ``metrics``,
``confidence``, ``oracle``, ``anticipation``, ``agreement``), drawn by ``plots`` and printed for the
docs by ``report``.
"""
