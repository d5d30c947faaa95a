"""The placement-stability benchmark: decision churn, reaction time and hub writes, per policy.

``live`` runs it on the local control plane; ``setup`` holds what it sets up (scorers, Placements,
the compressed clock); ``churn`` counts decision changes and reaction times from the samples;
``plot`` draws one scenario.  Nothing below ``live`` imports it.
"""
