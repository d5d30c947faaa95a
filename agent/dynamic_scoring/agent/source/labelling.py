"""Name the source of every series when a scorer reads several sources.

With ``sources``, the scorer receives the series of all sources in one ``data`` list, in source
order; each series carries the label ``source="<source name>"`` so the scorer can tell them apart
(two sources may well return the same metric with the same labels).  A series that already has a
``source`` label keeps its value as ``exported_source``, the rename Prometheus itself applies when a
scraped label collides with a target label; an ``exported_source`` already present is overwritten.

This costs one decode of each series' label map and one re-encode of the list: the ``values`` (and
native ``histograms``) arrays stay ``msgspec.Raw`` and are copied verbatim, never parsed.  The
single-source path (upstream's keys) does not come here and forwards Prometheus' bytes untouched.
"""

from __future__ import annotations

from typing import Any

import msgspec

SOURCE_LABEL = "source"
"""The label that names a series' source."""
EXPORTED_SOURCE_LABEL = "exported_source"
"""Where a series' own ``source`` label moves to."""


class _Series(msgspec.Struct, omit_defaults=True):
    metric: dict[str, str] = {}
    values: msgspec.Raw = msgspec.Raw(b"")
    histograms: msgspec.Raw = msgspec.Raw(b"")


_DECODER = msgspec.json.Decoder(list[_Series])
_ENCODER = msgspec.json.Encoder()


def label_series(raw: Any, source: str) -> tuple[bytes, int]:
    """``raw`` (a JSON array of matrix series) with ``source`` set on each series.

    Returns:
        The new JSON array and how many series had a ``source`` label of their own (renamed to
        ``exported_source``).

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: ``raw`` is not an array of series objects.
    """
    series = _DECODER.decode(raw)
    collisions = 0
    for item in series:
        labels = item.metric
        if SOURCE_LABEL in labels:
            collisions += 1
            labels[EXPORTED_SOURCE_LABEL] = labels[SOURCE_LABEL]
        labels[SOURCE_LABEL] = source
    return _ENCODER.encode(series), collisions


__all__ = ["EXPORTED_SOURCE_LABEL", "SOURCE_LABEL", "label_series"]
