"""The scorer registry's pure side, from the CR models to the health-probe logic.

DynamicScorer/DynamicScoringConfig models, their accepted spellings, the effective summary of a
scorer, and the health-probe and /config-fetch logic.

Nothing here talks to Kubernetes; the controllers feed these functions from their caches and write what
they return.  See docs/scorer-registry.md.
"""
