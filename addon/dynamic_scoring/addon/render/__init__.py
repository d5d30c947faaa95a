"""Rendering: the agent's manifests for one cluster, and the agent's hub RBAC, from `templates/`."""
