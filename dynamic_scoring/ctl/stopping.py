"""How a long-running subcommand (``replay``, ``status --watch``) is stopped: Ctrl-C or SIGTERM alike.

Python turns only SIGINT into ``KeyboardInterrupt``.  SIGTERM is what ``kill``, systemd and the
kubelet send, and a process started in the background by a non-interactive shell inherits SIGINT
*ignored*, so there SIGTERM is the only polite way to stop it.  Without a handler SIGTERM kills
the process at once: no "stopped" line, no port released by a ``with`` block, and exit code 143
instead of 0.  This module makes SIGTERM raise ``KeyboardInterrupt`` while the command runs, so
both signals take the one unwinding path the command already has for Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` in the main thread; restored after.

    Outside the main thread (where Python forbids installing handlers, as in some test runners)
    the block runs unchanged: SIGTERM keeps whatever disposition the process has.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["sigterm_interrupts"]
