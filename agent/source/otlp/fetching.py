"""What a scoring cycle reads from an OpenTelemetry source: the store, rendered per selector.

The render runs in a worker thread: it copies the selected series under the store's lock and
formats their matrix, which for thousands of series takes long enough to stall other scorers'
cycles if it ran on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent.errors import SourceError
from agent.source.otlp.selection import Selector
from agent.source.otlp.store import SeriesStore
from agent.source.prometheus import RangeWindow


class OtlpReceiverDisabled(SourceError):  # noqa: N818 - reads as the condition reason
    """A scorer reads an OpenTelemetry source but this agent runs without its OTLP receiver."""


async def read_selected(
    store: SeriesStore | None, selectors: Sequence[Selector], window: RangeWindow
) -> list[bytes]:
    """One matrix (a JSON array of series) per selector, in order.

    Raises:
        OtlpReceiverDisabled: ``store`` is ``None`` (no ``--otlp-bind-address``).
    """
    if store is None:
        raise OtlpReceiverDisabled(
            "this agent's OTLP receiver is off (enable it with the AddOnDeploymentConfig variable "
            "OtlpReceiverPort, or --otlp-bind-address)"
        )

    def render() -> list[bytes]:
        return [store.render(selector, window) for selector in selectors]

    return await asyncio.to_thread(render)


__all__ = ["OtlpReceiverDisabled", "read_selected"]
