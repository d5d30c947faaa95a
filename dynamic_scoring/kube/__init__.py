"""The one Kubernetes access layer of the repository: JSON over the `kubernetes` package's transport.

The client and its typed errors (``api``), resource descriptions (``resources``), the controller core
the hub runs (informers, work queue, controllers, writes, leader election, conditions, metrics), and
the two types every Kubernetes object passes through: ``jsontypes`` (a decoded object) and
``timestamps`` (``metav1.Time`` read and written alike by hub, agent and CLI).
"""
