"""The hub's benchmarks: the addon manager at fleet scale, the scorer probe, the registry's
distribution, and the controller core against the official client.

``manager``, ``probe`` and ``registry`` register benchmarks; ``core`` is a script of its own
(``python -m bench.hub.core``).  ``floor`` replays the same writes through a Go client-go program (its
sources sit beside it), the apiserver's floor the manager is measured against.
"""
