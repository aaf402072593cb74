"""How `gateway run` stops: Ctrl-C (SIGINT) and SIGTERM (what systemd sends) end it the same way,
at any moment, with one "stopped" line and exit 0 (a stop that was asked for is not a failure).

Before the event loop runs (the models load for minutes on a slow board) SIGTERM raises
KeyboardInterrupt, as Ctrl-C does; inside the loop it sets an event that ends the serving
TaskGroup (`loop.add_signal_handler`), and Ctrl-C cancels the main task (asyncio.run's own
handler). Once stopping, a second SIGTERM is ignored so the last clean-up is not cut short.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the body (the synchronous model loading); after it,
    SIGTERM is ignored: the process is stopping anyway."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextmanager
def sigterm_sets(stop: asyncio.Event) -> Iterator[None]:
    """Inside the running loop: SIGTERM sets `stop` (the serving code then ends cleanly)."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        yield
    finally:  # back to what it was (asyncio would reset it to the default, which kills with 143)
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous)
