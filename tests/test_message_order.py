"""A conversation reloaded reads in the order it was lived: each pass's reply right after the
person's message it answers, as the page placed it live (static/app.js), even when the person wrote
again before that reply came. A helper saw the two differ (2026-12-07): live "m1, r1, m2, r2",
reloaded "m1, m2, r1, r2" (by when each was written)."""

from __future__ import annotations

import re
from typing import Any

import pytest


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"TURNS_RUNNER": "dramatiq"}  # (the passes wait in the queue until the test runs them)


def _said_in_order(html: str) -> list[str]:
    """The chat's lines as the page shows them, top to bottom: (who, first words)."""
    found = re.findall(r'class="message message--(user|assistant)[^"]*".*?<p>(.*?)</p>', html, flags=re.S)
    return [f"{who}: {re.sub(r'<[^>]+>', '', words).strip()[:30]}" for who, words in found]


def test_replies_follow_the_messages_they_answer_after_a_reload_as_they_did_live(app, alice):
    from app.copilot.turns import drain

    convo = alice.new_conversation()
    alice.say(convo, "/list_posts")
    alice.say(convo, "/whoami")  # (before the first reply was written: both queued)
    drain(app)
    lines = _said_in_order(alice.client.get(f"/c/{convo}").get_data(as_text=True))
    assert [line.split(":")[0] for line in lines] == ["user", "assistant", "user", "assistant"], lines
    assert lines[0].startswith("user: /list_posts") and lines[2].startswith("user: /whoami"), lines
