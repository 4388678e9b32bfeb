"""What an event costs the ASGI server's event loop on its way from a pass to its streamed person,
counted in trips through the loop (issue 25). Under 200 streamed turns a trip takes tens of
milliseconds, so each one an event waits is time the person waits: `asyncio.wait_for` (Python
3.11) ran each read of the tap as a task of its own, three trips an event, and one already
waiting on the tap still cost two. Counts, not timings: asyncio runs ready callbacks in order."""

from __future__ import annotations

import asyncio
from typing import Any

from app.api.turn_server import FOLLOW_REDIS, Handoff, TurnServer

CONVERSATION = 424242  # (no row: a tap is keyed by the id alone)


async def _trips(reading: asyncio.Task[Any]) -> int:
    """How many trips through the loop until `reading` is done (this coroutine yields once a trip)."""
    trips = 0
    while not reading.done():
        await asyncio.sleep(0)  # (one trip: every callback ready now runs before this one again)
        trips += 1
    return trips


def test_an_event_a_pass_hands_over_wakes_its_waiting_stream_in_one_trip(app: Any) -> None:
    async def main() -> tuple[int, Any]:
        loop = asyncio.get_running_loop()
        server, handoff = TurnServer(app), Handoff(CONVERSATION, True, loop)
        gone: asyncio.Future[None] = loop.create_future()
        try:
            reading = asyncio.create_task(server._next(handoff, True, "0-0", 60.0, gone))  # type: ignore[arg-type]
            for _ in range(5):  # (the stream waits on its tap)
                await asyncio.sleep(0)
            assert not reading.done()
            handoff.tap.put("an event")
            return await _trips(reading), reading.result()
        finally:
            handoff.cancel()

    trips, got = asyncio.run(main())
    assert got == ["an event"]
    assert trips == 1, trips  # (3 through asyncio.wait_for's own task)


def test_events_already_on_the_tap_are_read_without_a_trip(app: Any) -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        server, handoff = TurnServer(app), Handoff(CONVERSATION, True, loop)
        gone: asyncio.Future[None] = loop.create_future()
        try:
            for event in ("words", "the end", FOLLOW_REDIS):
                handoff.tap.put(event)
            got = []
            for _ in range(3):
                step = server._next(handoff, True, "0-0", 60.0, gone)  # type: ignore[arg-type]
                try:
                    step.send(None)  # (a coroutine that never yields ends at its first step)
                except StopIteration as ended:
                    got.append(ended.value)
                else:
                    step.close()
                    raise AssertionError("reading an event already on the tap yielded to the loop")
            return got
        finally:
            handoff.cancel()

    assert asyncio.run(main()) == [["words"], ["the end"], FOLLOW_REDIS]


def test_a_tap_with_nothing_to_hand_over_times_out_as_a_keep_alive(app: Any) -> None:
    async def main() -> Any:
        loop = asyncio.get_running_loop()
        server, handoff = TurnServer(app), Handoff(CONVERSATION, True, loop)
        gone: asyncio.Future[None] = loop.create_future()
        try:
            return await server._next(handoff, True, "0-0", 0.01, gone)  # type: ignore[arg-type]
        finally:
            handoff.cancel()

    assert asyncio.run(main()) == []  # (the stream sends a keep-alive for it; nothing is put: the wait always runs out)
