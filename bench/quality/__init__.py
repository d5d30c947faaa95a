"""Placement quality on public data-center traces: trace loading (traces) and scoring rules (metrics)."""
