"""A request that waits for a turn (TURN_WAIT, 25 s by default) longer than the blocking Redis
client's socket allows (EVENTS_HEARTBEAT + 10 s, 25 s by default) answers that the turn is still
going: before, its one long XREAD outlasted the socket and the request failed with a 500."""

from __future__ import annotations

from typing import Any

import pytest

from app.copilot import events


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"EVENTS_HEARTBEAT": 1}  # the blocking client's socket then times out after 11 s


def test_a_wait_longer_than_the_blocking_sockets_timeout_ends_without_an_event_not_an_error(app):
    with app.app_context():
        assert app.config["REDIS_URL"]  # a real server: the socket's timeout is real
        quiet = events.last_id(987654)  # a conversation whose stream nobody writes to
        assert events.wait_for_end(987654, run_id=1, after=quiet, seconds=12) is None
