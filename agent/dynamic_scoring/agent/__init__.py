"""The dynamic-scoring agent: one process per managed cluster that turns metrics into placement scores."""
