"""`dynamic-scoring`: the operator CLI for scorer authors and placement users (docs/cli.md).

It sits above the hub manager and the agent (``.importlinter``): ``explain`` runs the agent's own
cycle stages, ``why`` and ``status`` read what the hub holds.  Nothing here writes to a cluster.
"""
