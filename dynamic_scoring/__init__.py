"""What the hub manager (`addon/`), the agent (`agent/`) and the test harness (`e2e/`) share.

Two things cross between the hub and the agent, and both live here so that neither side imports
the other: the wire contracts (`wire`: the summary list, the scoring request and response, the
`/config` document) and the one Kubernetes access layer (`kube`: client, typed errors, watches).
"""
