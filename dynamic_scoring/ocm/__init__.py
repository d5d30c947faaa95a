"""OCM's objects as both the hub and the agent read and write them.

An AddOnPlacementScore's name for a score (``naming``, upstream's derivation, which existing
Placements refer to), the labels our agent puts on the ones it owns (``score_labels``), and how a
Placement weighs them (``placement_policy``, the placement controller's reading, used by ``why``,
ordered MultiKueue dispatch and the placement-quality benchmark).  Kubernetes access itself is in
``dynamic_scoring.kube``.
"""
