"""What a scoring cycle reads from an OpenTelemetry source: the store, rendered per selector.

The render runs in a worker thread: it copies the selected series under the store's lock and
formats their matrix, which for thousands of series takes long enough to stall other scorers'
cycles if it ran on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dynamic_scoring.agent.errors import SourceError
from dynamic_scoring.agent.source.otlp.selection import Selector
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.source.prometheus import RangeWindow


class OtlpReceiverDisabled(SourceError):  # noqa: N818 - reads as the condition reason
    """A scorer reads an OpenTelemetry source but this agent runs without its OTLP receiver."""


class OtlpResultTooLarge(SourceError):  # noqa: N818 - reads as the condition reason
    """The selected series render to more bytes than the cycle's source budget allows."""


async def read_selected(
    store: SeriesStore | None, selectors: Sequence[Selector], window: RangeWindow, *, max_bytes: int
) -> list[bytes]:
    """One matrix (a JSON array of series) per selector, in order, together at most ``max_bytes``.

    The budget is the one Prometheus answers share (``max_source_bytes_per_cycle``): the matrices
    stay in memory until the scoring call, whichever source they came from.

    Raises:
        OtlpReceiverDisabled: ``store`` is ``None`` (no ``--otlp-bind-address``).
        OtlpResultTooLarge: the matrices exceed ``max_bytes``.
    """
    if store is None:
        raise OtlpReceiverDisabled(
            "this agent's OTLP receiver is off (enable it with the AddOnDeploymentConfig variable "
            "OtlpReceiverPort, or --otlp-bind-address)"
        )

    def render() -> list[bytes]:
        return [store.render(selector, window) for selector in selectors]

    rendered = await asyncio.to_thread(render)
    size = sum(len(raw) for raw in rendered)
    if size > max_bytes:
        raise OtlpResultTooLarge(
            f"the selected OpenTelemetry series render to {size} bytes, more than the {max(0, max_bytes)} "
            "left in this cycle's source budget; select fewer series or a coarser step"
        )
    return rendered


__all__ = ["OtlpReceiverDisabled", "OtlpResultTooLarge", "read_selected"]
