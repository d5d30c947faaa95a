"""Distribution's pure side: which summaries each enabled cluster gets, and the ConfigMap that carries them.

The distribution controller (to come, on ``dynamic_scoring.kube``) feeds ``plan`` from its caches and
wraps ``summaries_configmap`` into one ManifestWork per cluster.  See docs/scorer-registry.md.
"""
