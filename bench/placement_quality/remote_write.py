"""Samples pushed into a real Prometheus as they are produced: Prometheus remote write, version 1.

Why.  The closed loop (``bench.placement_quality.closed_loop``) makes each cluster's load at step ``j``
depend on the decisions taken before it, so the series cannot be backfilled up front: each step's samples are
written after that step's decisions, and the agent's next cycle reads them back through the usual
``query_range``.  Prometheus 2.33 and later accept pushes on ``/api/v1/write`` when started with
``--web.enable-remote-write-receiver`` (``e2e.prometheus.PrometheusServer(remote_write_receiver=True)``).

Why the wire format is written here.  A remote-write request is a snappy-compressed protobuf
``prometheus.WriteRequest``.  No maintained Python package ships those messages, and the part used is
four small messages (request, series, label, sample) of scalar fields; encoding them takes a dozen
lines, and the component test checks every written value comes back from a real Prometheus exactly.
Snappy's block format comes from ``cramjam`` (a maintained binding of the Rust snappy crate).

Prometheus' head block appends samples in time order per series: every write here is at a time after
the series' last sample (backfilled blocks included), as the closed loop writes one step at a time.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

import cramjam
import httpx

WRITE_PATH = "/api/v1/write"
HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}

Labels = Mapping[str, str]
"""One series' labels, ``__name__`` included."""
Samples = Sequence[tuple[int, float]]
"""``(unix milliseconds, value)`` pairs of one series, in time order."""


def _varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    if value < 0:
        raise ValueError(f"varint of a negative number: {value}")
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): a string or an embedded message."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _sample(millis: int, value: float) -> bytes:
    """``Sample{value = 1 (double), timestamp = 2 (int64, ms)}``."""
    return b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(millis)


def _series(labels: Labels, samples: Samples) -> bytes:
    """``TimeSeries{labels = 1, samples = 2}``; labels sorted by name, as Prometheus requires."""
    if "__name__" not in labels:
        raise ValueError(f"a series needs a __name__ label: {dict(labels)}")
    body = b"".join(
        _delimited(1, _delimited(1, name.encode()) + _delimited(2, value.encode()))
        for name, value in sorted(labels.items())
    )
    return body + b"".join(_delimited(2, _sample(ms, v)) for ms, v in samples)


def encode(series: Sequence[tuple[Labels, Samples]]) -> bytes:
    """A ``WriteRequest{timeseries = 1}`` of ``series``, snappy-compressed (the request body)."""
    request = b"".join(_delimited(1, _series(labels, samples)) for labels, samples in series)
    return bytes(cramjam.snappy.compress_raw(request))


class RemoteWriteError(RuntimeError):
    """Prometheus refused a write (the message carries its status and answer)."""


class RemoteWriter:
    """Pushes samples to one Prometheus' remote-write receiver over a kept-alive connection.

    Args:
        base_url: the Prometheus, e.g. ``http://127.0.0.1:9090``.
        timeout: seconds one write may take.
    """

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self._client = httpx.Client(base_url=base_url, timeout=timeout, headers=HEADERS)

    def write(self, series: Sequence[tuple[Labels, Samples]]) -> None:
        """Write ``series``; returns once Prometheus has appended them (they are queryable then).

        Raises:
            RemoteWriteError: Prometheus answered with an error (for example an out-of-order sample).
        """
        response = self._client.post(WRITE_PATH, content=encode(series))
        if response.status_code // 100 != 2:
            raise RemoteWriteError(
                f"remote write refused ({response.status_code}): {response.text.strip()[:500]}"
            )

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self) -> RemoteWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


__all__ = ["RemoteWriteError", "RemoteWriter", "encode"]
