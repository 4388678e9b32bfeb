"""MCP at the edges (issue 13, points 12 and 13), against a real server process: a value no database
here can store (NUL, a lone surrogate, NaN) is a tool error the model can read, never a 500 or a
driver error; a body nested too deep is a JSON-RPC parse error; tool calls are limited per token."""

from __future__ import annotations

import json

import httpx2
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, Post
from tests.helpers.mcp import HTTP_TIMEOUT, McpServer, first_leg, module_server, tokens  # noqa: F401 (tokens: a fixture)

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}


class LimitedMcpServer(McpServer):
    """The MCP server with its rate limit on, at two tool calls a minute per token."""

    def start(self):
        self.env.update(RATELIMIT_ENABLED="1", RATELIMIT_MCP_CALLS_PER_TOKEN="2 per minute")
        super().start()


mcp_process, server = module_server(LimitedMcpServer)


def raw_call(server, token, arguments_json: str):
    """A tools/call for draft_post written by hand, so it can hold what JSON libraries will not write."""
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "draft_post", '
        f'"arguments": {arguments_json}, "_meta": {json.dumps(ENVELOPE)}}}}}'
    )
    with httpx2.Client(timeout=HTTP_TIMEOUT) as http:
        response = http.post(
            server.url,
            content=body.encode(),
            headers={
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token}",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "draft_post",
            },
        )
    return response


def tool_error(response) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is True
    return result["content"][0]["text"]


def nothing_stored(app):
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
        assert db.session.scalar(sa.select(Post).where(Post.title.like("a%b"))) is None


def test_unstorable_arguments_are_a_tool_error_and_nothing_is_stored(app, server, tokens):
    nul = first_leg(server, tokens["alice"], "draft_post", {"title": "a\x00b"})
    assert nul.is_error and nul.content[0].text == "Invalid arguments: Text may not contain the NUL character (U+0000)."
    surrogate = tool_error(raw_call(server, tokens["bob"], '{"title": "a\\ud800b"}'))
    assert surrogate.startswith("Invalid arguments: Text may not contain a lone surrogate")
    nan = tool_error(raw_call(server, tokens["carol"], '{"title": "ab", "body": NaN}'))
    assert nan == "Invalid arguments: Numbers must be finite: NaN and Infinity are not JSON."
    nothing_stored(app)


def test_a_body_nested_too_deep_is_a_parse_error(server, tokens):
    with httpx2.Client(timeout=HTTP_TIMEOUT) as http:
        response = http.post(
            server.url,
            content=b"[" * 100_000,
            headers={
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "Authorization": f"Bearer {tokens['alice']}",
                "MCP-Protocol-Version": "2026-07-28",
            },
        )
    assert response.status_code == 400 and response.json()["error"]["message"] == "Parse error"


def test_tool_calls_are_limited_per_token(app, server, tokens):
    said = [first_leg(server, tokens["alice"], "list_posts", {}) for _ in range(3)]
    assert [r.is_error for r in said] == [False, False, True]
    assert said[2].content[0].text.startswith("Too many tool calls with this token. Try again in ")
    assert not first_leg(server, tokens["bob"], "list_posts", {}).is_error  # another token: its own count
