"""The dynamic-scoring hub addon manager."""
