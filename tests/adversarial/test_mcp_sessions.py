"""A handshake-era MCP session (Mcp-Session-Id, issued at initialize) belongs to the token that
opened it: any other token, of another person, another tenant or the same person, that posts into
it (an answer to its pending form, a request), opens its GET stream or DELETEs it gets the 404 an
unknown session gets, and nothing reaches the session. Driven by hand over real HTTP, so the
other token can be put on the session's id, against a real server process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Post
from tests.helpers.mcp import HTTP_TIMEOUT, clients, mcp_process, server, tokens  # noqa: F401  (the fixtures)

LEGACY = "2025-06-18"
FORM = {"title": "Bob's draft", "body": "Bob's own words", "status": "draft"}
FORGED = {"action": "accept", "content": {"title": "Forged", "body": "Someone else's words", "status": "published"}}
UNKNOWN = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}


class Session:
    """A 2025-06-18 session opened by `token`; every request may carry another token on its id."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token, self.id = url, token, ""
        self.http = httpx2.Client(timeout=HTTP_TIMEOUT)
        opened = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "clientInfo": {"name": "hand", "version": "1"},
                    "capabilities": {"elicitation": {"form": {}}},
                },
            },
            token,
        )
        assert opened.status_code == 200, opened.text
        self.id = opened.headers["mcp-session-id"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, token).status_code == 202

    def headers(self, token: str) -> dict[str, str]:
        sent = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": LEGACY,
        }
        return {**sent, "Mcp-Session-Id": self.id} if self.id else sent

    def post(self, message: dict[str, Any], token: str) -> httpx2.Response:
        return self.http.post(self.url, content=json.dumps(message), headers=self.headers(token))

    def delete(self, token: str) -> httpx2.Response:
        return self.http.delete(self.url, headers=self.headers(token))

    def get_status(self, token: str) -> int:
        """Open the session's GET stream and close it again: its status only."""
        with self.http.stream("GET", self.url, headers=self.headers(token)) as response:
            return response.status_code

    def answer(self, request_id: Any, result: dict[str, Any], token: str) -> httpx2.Response:
        return self.post({"jsonrpc": "2.0", "id": request_id, "result": result}, token)

    @contextlib.contextmanager
    def call(self, name: str, arguments: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        """tools/call with the session's own token: the messages of its SSE stream, one by one."""
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        with self.http.stream("POST", self.url, content=json.dumps(message), headers=self.headers(self.token)) as r:
            assert r.status_code == 200
            yield (json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:"))


@pytest.fixture
def bob(server, clients):
    """Bob's own app (client token) in a handshake-era session: it may fill his forms itself."""
    session = Session(server.url, clients["bob"])
    yield session
    session.http.close()


def others(tokens, clients) -> dict[str, str]:
    """Every token but the session's own: another person's, another tenant's, bob's own agent's."""
    return {
        "alice's agent": tokens["alice"],
        "alice's client": clients["alice"],
        "carol's agent (globex)": tokens["carol"],
        "bob's own agent": tokens["bob"],
    }


def is_unknown(response: httpx2.Response) -> bool:
    return response.status_code == 404 and response.json() == UNKNOWN


def saved(app, title: str) -> Post | None:
    with app.app_context():
        return db.session.scalar(sa.select(Post).where(Post.title == title))


def test_another_token_cannot_answer_the_sessions_pending_form(app, bob, tokens, clients):
    with bob.call("draft_post", {"title": FORM["title"]}) as stream:
        ask = next(stream)
        assert ask["method"] == "elicitation/create" and ask["params"]["mode"] == "form"
        for who, token in others(tokens, clients).items():
            assert is_unknown(bob.answer(ask["id"], FORGED, token)), who
        assert bob.answer(ask["id"], {"action": "accept", "content": FORM}, bob.token).status_code == 202
        result = next(stream)
    assert result["id"] == 1
    assert result["result"]["content"][0]["text"].startswith("The person filled in: title, body, status.")
    assert saved(app, "Forged") is None
    assert saved(app, FORM["title"]).body == "Bob's own words"


def test_another_token_cannot_decline_the_sessions_pending_form(app, bob, tokens):
    with bob.call("draft_post", {"title": FORM["title"]}) as stream:
        ask = next(stream)
        assert is_unknown(bob.answer(ask["id"], {"action": "decline"}, tokens["carol"]))
        assert bob.answer(ask["id"], {"action": "accept", "content": FORM}, bob.token).status_code == 202
        assert next(stream)["result"]["isError"] is False
    assert saved(app, FORM["title"]).status == "draft"


def test_another_token_cannot_answer_under_another_protocol_header(app, bob, tokens):
    """No MCP-Protocol-Version is the handshake route (404); a stateless one never reads the session id."""
    with bob.call("draft_post", {"title": FORM["title"]}) as stream:
        ask = next(stream)
        forged = {"jsonrpc": "2.0", "id": ask["id"], "result": FORGED}
        for version in (None, "2026-07-28", "2099-01-01"):
            headers = {k: v for k, v in bob.headers(tokens["carol"]).items() if k != "MCP-Protocol-Version"}
            headers |= {"MCP-Protocol-Version": version} if version else {}
            response = bob.http.post(bob.url, content=json.dumps(forged), headers=headers)
            assert response.status_code == (404 if version is None else 400), version
        assert bob.answer(ask["id"], {"action": "accept", "content": FORM}, bob.token).status_code == 202
        assert next(stream)["result"]["isError"] is False
    assert saved(app, "Forged") is None
    assert saved(app, FORM["title"]).body == "Bob's own words"


def test_another_token_cannot_delete_the_session_and_its_own_can(bob, tokens, clients):
    for who, token in others(tokens, clients).items():
        assert is_unknown(bob.delete(token)), who
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert bob.post(ping, bob.token).status_code == 200  # the session is still there
    assert bob.delete(bob.token).status_code == 200
    assert is_unknown(bob.post(ping, bob.token))


def test_another_token_cannot_open_the_sessions_stream_or_call_in_it(app, bob, tokens, clients):
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "draft_post", "arguments": FORGED["content"]}}
    for who, token in others(tokens, clients).items():
        assert bob.get_status(token) == 404, who
        assert is_unknown(bob.post(call, token)), who
    assert saved(app, "Forged") is None
    assert bob.get_status(bob.token) == 200


def test_refused_looks_exactly_like_an_unknown_session(bob, tokens):
    """404, not 403: a wrong token learns nothing about whether the id exists."""
    ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
    foreign = bob.post(ping, tokens["carol"])
    bob.id = "0" * 32  # an id never issued (or issued before a restart)
    made_up = bob.post(ping, tokens["carol"])
    own_made_up = bob.post(ping, bob.token)
    assert (
        (foreign.status_code, foreign.content)
        == (made_up.status_code, made_up.content)
        == (own_made_up.status_code, own_made_up.content)
    )
    assert is_unknown(foreign)
