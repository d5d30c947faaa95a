"""dynamic-scoring: the one import name the distribution installs.

Its subpackages are the hub manager (`addon`), the agent (`agent`), the operator CLI (`ctl`), the
scorer library (`scorer`) and the sample scorers (`samples`); one package, so that `pip install
dynamic-scoring` puts nothing into site-packages that could clash with a scorer author's own
modules.  The other modules here are what the hub, the agent and the test harness (`e2e/`) share.
Two things cross between the hub and the agent, and both live here so that neither side imports
the other: the wire contracts (`wire`: the summary list, the scoring request and response, the
`/config` document) and the one Kubernetes access layer (`kube`: client, typed errors, watches).
"""
