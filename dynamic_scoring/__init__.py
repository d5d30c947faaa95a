"""dynamic-scoring: the one import name the distribution installs.

Its subpackages are the hub manager (`addon`), the agent (`agent`), the operator CLI (`ctl`), the
scorer library (`scorer`) and the sample scorers (`samples`); one package, so that `pip install
dynamic-scoring` puts nothing into site-packages that could clash with a scorer author's own
modules.  What the hub, the agent and the test harness (`e2e/`) share is grouped in rooms, so that
neither side imports the other: the wire contract (`contract`: the summary list, the scoring request
and response, the `/config` document), the outbound-request policy (`outbound`: URLs, addresses,
Secrets' destinations), OCM's objects (`ocm`: score names and labels, Placement's weights), the one
Kubernetes access layer (`kube`: client, typed errors, watches, the controller core) and the process
runtime (`runtime`: HTTP server base, listen addresses, backoff).
"""
