"""Where the series come from: Prometheus ``query_range`` (or nothing, for ``sourceType: None``)."""
