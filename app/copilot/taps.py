"""A conversation's events handed over in process as they are appended: the ASGI server's
streamed turn runs its pass on its own event loop, and reads that pass's events from here, not
back from Redis. Redis still gets every event (app.copilot.events), for every other view and for
a resume with Last-Event-ID; a tap only saves the round trip between the pass and its person."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["Tap", "hand_over", "tap"]


class Tap:
    """The events this process appends to one conversation from its opening on, in order; read on
    the loop it was opened for (`await tap.get(wait)`), closed when done."""

    def __init__(self, conversation_id: int, loop: asyncio.AbstractEventLoop) -> None:
        self.conversation_id, self.loop = conversation_id, loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def put(self, event: Any) -> None:
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:  # (no loop runs in this thread: a gunicorn thread, a CLI command)
            here = False
        if here:
            self.queue.put_nowait(event)
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)

    async def get(self, wait: float) -> Any:
        """The next event; TimeoutError when none comes within `wait` seconds. One already here
        is taken without yielding to the loop, and one that comes wakes this task directly:
        `asyncio.wait_for` would run the wait as a task of its own (Python 3.11), two more trips
        through a loop that, busy, takes tens of milliseconds a trip."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        async with asyncio.timeout(wait):
            return await self.queue.get()

    def close(self) -> None:
        with _lock:
            held = _taps.get(self.conversation_id, [])
            if self in held:
                held.remove(self)
            if not held:
                _taps.pop(self.conversation_id, None)


_taps: dict[int, list[Tap]] = {}  # conversation id -> this process's open taps on it
_lock = threading.Lock()


def tap(conversation_id: int, loop: asyncio.AbstractEventLoop) -> Tap:
    """A Tap on the conversation's events this process appends from now on, read on `loop`."""
    opened = Tap(conversation_id, loop)
    with _lock:
        _taps.setdefault(conversation_id, []).append(opened)
    return opened


def hand_over(conversation_id: int, event: Any) -> None:
    """An event just appended to the conversation's stream, to each of its taps here (none: one
    dict look-up, the usual case of every process but the ASGI server's)."""
    if not _taps:
        return
    with _lock:
        held = list(_taps.get(conversation_id, ()))
    for opened in held:
        opened.put(event)
