"""The one Kubernetes access layer of the repository: JSON over the `kubernetes` package's transport."""
