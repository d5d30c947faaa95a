"""A real OCM control plane (hub plus managed clusters) run as local processes, for tests and demos."""
