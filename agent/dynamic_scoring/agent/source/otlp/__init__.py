"""The agent's OpenTelemetry source: an OTLP/HTTP metrics receiver and the store scorers read from.

See ``docs/opentelemetry.md``.  ``receiver`` accepts pushes, ``decoding`` turns a request body into
an ``ExportMetricsServiceRequest``, ``translation`` flattens it into labelled points, ``store``
keeps the points some scorer selects and renders them as a Prometheus matrix, ``selection``
compiles the scorers' selectors and ``telemetry`` exports the receiver's own metrics.
"""
