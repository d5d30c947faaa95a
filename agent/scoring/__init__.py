"""From series to scores: the scoring API call, normalising, clamping, item names and APS names."""
