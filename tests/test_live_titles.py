"""Titles follow the conversation live (issue 24): its first message and a rename are a `title`
event on its stream, so every open tab's heading, list and tab title follow, and the API's stream
says the new title."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.copilot import events
from app.extensions import db
from app.models import User
from tests.conftest import api_headers


@pytest.fixture
def app_config() -> dict[str, Any]:
    # A stream that finds nothing ends soon (the test then fails, it never hangs).
    return {"EVENTS_STREAM_SECONDS": 20, "EVENTS_HEARTBEAT": 1, "EVENTS_RECHECK": 1}


def title_events(app, convo: int) -> int:
    with app.app_context():
        return sum(1 for e in events.read(convo, "0-0", None) if e.type == "title")


def test_a_first_message_and_a_rename_are_title_events_on_the_conversations_stream(app, alice):
    convo = alice.new_conversation()
    alice.say(convo, "/list_posts")
    assert title_events(app, convo) == 1
    alice.say(convo, "/list_posts")  # a later message keeps the title: no event
    assert title_events(app, convo) == 1
    alice.htmx_post(f"/c/{convo}/title", title="Spring plans")
    assert title_events(app, convo) == 2


def test_an_open_pages_stream_swaps_in_the_new_heading_and_list_link(app, alice):
    convo = alice.new_conversation()
    alice.say(convo, "/delete_post post=2")
    body = read_until(alice.client, f"/c/{convo}/events?since=0-0", "event: message", 'id="conversation-title"')
    assert re.search(r'<h1 class="chat__title" id="conversation-title" hx-swap-oob="true">Delete post</h1>', body)
    assert f'<a id="conversation-link-{convo}" href="/c/{convo}" hx-swap-oob="true">Delete post</a>' in body


def test_the_api_stream_says_the_new_title(app, alice):
    convo = alice.new_conversation()
    alice.htmx_post(f"/c/{convo}/title", title="Spring plans")
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")))
    api = app.test_client()
    body = read_until(api, f"/api/conversations/{convo}/events?after=0-0", "event: title", "\n\n", headers=api_headers(token))
    data = re.search(r"event: title\ndata: (.*)\n", body).group(1)  # type: ignore[union-attr]
    assert json.loads(data) == {"title": "Spring plans"}


def read_until(client, url: str, *marks: str, **kwargs: Any) -> str:
    """An event stream's text up to where each mark has been seen (in order)."""
    response = client.get(url, buffered=False, **kwargs)
    assert response.status_code == 200
    body = ""
    try:
        for chunk in response.response:
            body += chunk.decode()
            at = 0
            for mark in marks:
                at = body.find(mark, at)
                if at < 0:
                    break
            else:
                return body
    finally:
        response.close()
    raise AssertionError(f"the stream ended before {marks!r}: {body[-500:]}")
