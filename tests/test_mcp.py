"""Countersign over MCP: the SDK's own client, over real HTTP, to a server process of our own."""

from __future__ import annotations

import asyncio

import httpx2
import mcp_types as types
import pytest
import sqlalchemy as sa
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from app.auth import create_token
from app.extensions import db
from app.models import Approval, Post, User
from tests.conftest import DATABASE_URL
from tests.helpers.mcp import (  # noqa: F401 (clients, mcp_process, server, tokens: fixtures)
    HTTP_TIMEOUT,
    PUBLIC,
    ShortLockWait,
    client,
    clients,
    first_leg,
    mcp_process,
    module_server,
    never,
    retry_leg,
    run,
    server,
    tokens,
)
from tests.helpers.prompts import prompt_of, shown_in_elicitation

short_wait_process, short_wait = module_server(ShortLockWait, "short_wait")
UNAVAILABLE = "The service is briefly unavailable. Nothing was changed; please try again."


def test_tools_carry_their_kind_as_annotations(server, tokens):
    async def main():
        async with client(server, tokens["alice"]) as c:
            return {t.name: t.annotations for t in (await c.list_tools()).tools}

    tools = run(main())
    assert tools["list_posts"].read_only_hint is True
    assert tools["delete_post"].destructive_hint is True
    assert tools["send_email"].open_world_hint is True
    assert tools["publish_post"].read_only_hint is False and not tools["publish_post"].destructive_hint


def test_a_missing_field_is_a_form_and_accept_runs_the_action(app, server, clients):
    seen = []

    async def answer(context, params):
        seen.append(params)
        return types.ElicitResult(action="accept", content={"body": "Written in an MCP client", "status": "draft"})

    async def main():
        async with client(server, clients["alice"], answer) as c:
            return await c.call_tool("draft_post", {"title": "From MCP"})

    result = run(main())
    assert isinstance(seen[0], types.ElicitRequestFormParams)
    assert seen[0].message == "A few details for your post."
    with app.app_context():
        form = db.session.scalar(sa.select(Approval.id).where(Approval.action == "draft_post"))
    shown_in_elicitation(prompt_of(app, form, channel="mcp"), seen[0].message)  # the engine's Prompt
    assert seen[0].requested_schema["required"] == ["title", "body", "status"]
    assert result.content[0].text.startswith("The person filled in: body, status.")
    assert "Written in an MCP client" not in result.content[0].text
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "From MCP")).body == "Written in an MCP client"


def test_declining_the_form_runs_nothing(app, server, clients):
    async def main():
        async with client(server, clients["alice"], lambda c, p: _decline()) as c:
            return await c.call_tool("draft_post", {"title": "Never"})

    result = run(main())
    assert "declined" in result.content[0].text
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "Never")) is None


async def _decline():
    return types.ElicitResult(action="decline")


def confirm_on_the_web(sign_in, url):
    """The person opens the card's page, signed in, and presses Confirm."""
    alice = sign_in("alice@example.com")
    path = url.removeprefix(PUBLIC)
    page = alice.client.get(path).get_data(as_text=True)
    approval, token = alice.card(page)
    return alice.answer(approval, token)


def test_a_card_is_a_url_elicitation_confirmed_in_the_browser(app, server, tokens, posts, sign_in, handle_calls):
    asked = []

    async def answer(context, params):
        asked.append(params)
        with app.app_context():
            assert db.session.get(Post, posts["Spring meetup"]) is not None  # nothing ran yet
        response = await asyncio.to_thread(confirm_on_the_web, sign_in, params.url)
        assert response.status_code == 200
        return types.ElicitResult(action="accept")

    async def main():
        async with client(server, tokens["alice"], answer) as c:
            return await c.call_tool("delete_post", {"post": posts["Spring meetup"]})

    result = run(main())
    assert isinstance(asked[0], types.ElicitRequestURLParams)
    assert asked[0].url.startswith(f"{PUBLIC}/approvals/")
    shown = prompt_of(app, asked[0].url.rsplit("/", 1)[-1], channel="mcp")
    shown_in_elicitation(shown, asked[0].message)  # the card's own sentence, from the engine's Prompt
    assert result.content[0].text == shown.told == "Done. Deleted “Spring meetup”."
    assert handle_calls["n"] == 1
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is None


def test_the_server_restarting_between_elicitation_and_retry_changes_nothing(app, server, tokens, posts, sign_in, handle_calls):
    async def answer(context, params):
        await asyncio.to_thread(server.kill)
        await asyncio.to_thread(confirm_on_the_web, sign_in, params.url)
        await asyncio.to_thread(server.start)  # a new process, the same configured keys
        return types.ElicitResult(action="accept")

    async def main():
        async with client(server, tokens["alice"], answer) as c:
            return await c.call_tool("delete_post", {"post": posts["Launch notes"]})

    result = run(main())
    assert result.content[0].text == "Done. Deleted “Launch notes”."
    assert handle_calls["n"] == 1
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.status == "done")) == 1


def leaves(error):
    """The exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def refusal(error) -> str:
    from mcp.shared.exceptions import MCPError

    return " ".join(str(e) for e in leaves(error) if isinstance(e, MCPError))


def test_a_tampered_request_state_is_refused(app, server, clients, posts, handle_calls):
    first = first_leg(server, clients["alice"], "draft_post", {"title": "Tamper"})
    assert isinstance(first, types.InputRequiredResult)
    state = first.request_state
    tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    accept = {"answer": types.ElicitResult(action="accept", content={"body": "x", "status": "draft"})}
    with pytest.raises(BaseExceptionGroup) as error:
        retry_leg(server, clients["alice"], "draft_post", {"title": "Tamper"}, tampered, accept)
    assert refusal(error.value) == "Invalid or expired requestState"
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "Tamper")) is None


def test_another_persons_token_cannot_use_the_state(app, server, clients):
    first = first_leg(server, clients["alice"], "draft_post", {"title": "Alice's"})
    accept = {"answer": types.ElicitResult(action="accept", content={"body": "x", "status": "draft"})}
    with pytest.raises(BaseExceptionGroup) as error:  # the state is sealed to alice's token
        retry_leg(server, clients["bob"], "draft_post", {"title": "Alice's"}, first.request_state, accept)
    assert refusal(error.value) == "Invalid or expired requestState"
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "Alice's")) is None


def test_a_foreign_origin_or_host_and_a_missing_token_are_refused(app, server, tokens, posts, handle_calls):
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "delete_post", "arguments": {"post": posts["Spring meetup"]}},
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    bearer = {"Authorization": f"Bearer {tokens['alice']}"}
    with httpx2.Client(timeout=HTTP_TIMEOUT) as http:
        no_token = http.post(server.url, json=call, headers=accept)
        foreign_origin = http.post(server.url, json=call, headers={**accept, **bearer, "Origin": "https://evil.example"})
        foreign_host = http.post(server.url, json=call, headers={**accept, **bearer, "Host": "evil.example"})
    assert no_token.status_code == 401
    assert foreign_origin.status_code in (400, 403) and foreign_host.status_code in (400, 403, 421)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
    assert handle_calls["n"] == 0


def test_tools_are_the_actions_in_the_tokens_toolsets(app, server):
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        token = create_token(alice, toolsets="blog")

    async def main():
        async with client(server, token) as c:
            return {t.name for t in (await c.list_tools()).tools}

    names = run(main())
    assert "delete_post" in names and "send_email" not in names and "manage_files" not in names


def test_a_client_without_url_elicitation_gets_the_link_and_pending(app, server, tokens, posts, handle_calls):
    async def main():
        async with client(server, tokens["alice"]) as c:  # declares no elicitation at all
            return await c.call_tool("delete_post", {"post": posts["Spring meetup"]})

    result = run(main())
    assert result.content[0].text.startswith(f"Pending: the person must confirm this in Countersign: {PUBLIC}/approvals/")
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.scalar(sa.select(Approval.status)) == "pending"


def test_a_handshake_era_client_gets_a_classic_elicitation(app, server, clients):
    asked = []

    async def answer(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"body": "Old protocol", "status": "published"})

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {clients['alice']}"}, timeout=HTTP_TIMEOUT) as http:
            async with Client(
                streamable_http_client(server.url, http_client=http), elicitation_callback=answer, mode="legacy"
            ) as c:
                return await c.call_tool("draft_post", {"title": "Legacy"})

    result = run(main())
    assert isinstance(asked[0], types.ElicitRequestFormParams)
    assert result.content[0].text.startswith("The person filled in: body, status.")
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "Legacy")).status == "published"


# --- an agent-scoped token (what an MCP client holds) never answers a form or a card ----------------


def approval_row(app):
    with app.app_context():
        return db.session.scalar(sa.select(Approval))


def refused_attempts(app):
    from app.models import AuditEvent

    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent.detail).where(AuditEvent.outcome == "refused_attempt")))


def test_an_agent_tokens_form_is_a_url_elicitation_and_its_own_answer_changes_nothing(app, server, tokens):
    asked = []

    async def fill_it_ourselves(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"body": "The agent's words", "status": "published"})

    async def main():
        async with client(server, tokens["alice"], fill_it_ourselves) as c:
            return await c.call_tool("draft_post", {"title": "Agent form"})

    result = run(main())
    assert isinstance(asked[0], types.ElicitRequestURLParams)  # never the form's schema: the person fills it
    assert asked[0].url.startswith(f"{PUBLIC}/approvals/")
    assert result.content[0].text.startswith("Pending: only the person can answer this, in Countersign:")
    assert approval_row(app).status == "pending"
    assert refused_attempts(app) == ["agent_credential"]
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "Agent form")) is None


def test_an_agent_token_answering_the_form_leg_by_hand_changes_nothing(app, server, tokens):
    first = first_leg(server, tokens["alice"], "draft_post", {"title": "By hand"})
    (request,) = first.input_requests.values()
    assert isinstance(request.params, types.ElicitRequestURLParams)
    for answer in (
        types.ElicitResult(action="accept", content={"body": "x", "status": "published"}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
    ):
        result = retry_leg(server, tokens["alice"], "draft_post", {"title": "By hand"}, first.request_state, {"answer": answer})
        assert result.content[0].text.startswith("Pending: only the person can answer this"), answer
    assert approval_row(app).status == "pending"
    assert refused_attempts(app) == ["agent_credential"] * 3
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "By hand")) is None


def test_an_agent_tokens_decline_of_a_card_leaves_it_waiting_for_the_person(app, server, tokens, posts, sign_in, handle_calls):
    async def main():
        async with client(server, tokens["alice"], lambda c, p: _decline()) as c:
            return await c.call_tool("delete_post", {"post": posts["Spring meetup"]})

    result = run(main())
    assert result.content[0].text.startswith("Pending: only the person can answer this")
    approval = approval_row(app)
    assert approval.status == "pending" and approval.requested_by_agent and approval.requested_via.startswith("mcp:pat:")
    assert confirm_on_the_web(sign_in, f"{PUBLIC}/approvals/{approval.id}").status_code == 200
    assert handle_calls["n"] == 1


def test_a_blog_only_token_cannot_call_send_email_over_mcp(app, server):
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), toolsets="blog")

    async def main():
        async with client(server, token) as c:
            return await c.call_tool("send_email", {"to": "eve@example.net", "subject": "Hi", "body": "Hello"})

    result = run(main())
    assert result.is_error and result.content[0].text == "Unknown tool 'send_email'."
    assert approval_row(app) is None


def test_a_revoked_token_is_401_over_mcp(app, server, tokens):
    from app.models import ApiToken

    with app.app_context():
        alice_token_id = db.session.scalar(sa.select(ApiToken.id).join(User).where(User.email == "alice@example.com"))
    assert app.test_cli_runner().invoke(args=["users", "revoke-token", str(alice_token_id)]).exit_code == 0
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    with httpx2.Client(timeout=HTTP_TIMEOUT) as http:
        response = http.post(
            server.url,
            json=call,
            headers={"Authorization": f"Bearer {tokens['alice']}", "Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401


# --- the database away or locked: Countersign's own words, never the error's --------------------


@pytest.mark.skipif(
    DATABASE_URL.startswith("postgres"), reason="SQLite's write lock (the PostgreSQL pass stops its server: test_faults.py)"
)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_tool_call_that_meets_a_lock_past_its_wait_is_a_tool_error_in_plain_words_and_keeps_nothing(
    app, database_url, short_wait, clients, mode
):
    # Another connection holds SQLite's write lock past the process's wait (0.2 s here): the call's
    # write fails. The SDK answered what the handler raised with the error's own text (the SQL and
    # its values, to a handshake-era client) or "Internal server error" (a modern one); the model
    # reads a tool error that says what happened, and the same call goes through once the lock goes.
    import sqlite3

    arguments = {"title": f"Locked {mode}", "body": "Text", "status": "draft"}

    async def call():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {clients['alice']}"}, timeout=HTTP_TIMEOUT) as http:
            async with Client(streamable_http_client(short_wait.url, http_client=http), mode=mode) as c:
                return await c.call_tool("draft_post", arguments)

    run(call())  # (the process's first call opens its connections: not under the lock)
    with app.app_context():
        db.session.execute(sa.delete(Post).where(Post.title == arguments["title"]))
        db.session.commit()
    writer = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        locked = run(call())
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert locked.is_error and locked.content[0].text == UNAVAILABLE
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Post.id)).where(Post.title == arguments["title"])) == 0
    again = run(call())
    assert not again.is_error
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Post.id)).where(Post.title == arguments["title"])) == 1


def test_an_mcp_call_whose_action_meets_the_database_away_is_the_503_in_plain_words(app, clients, monkeypatch):
    # The same call in process (the server's own handler code): handle() meets no pooled
    # connection free in time. It was "Failed: QueuePool limit of size 5 ..." as the action's own
    # result (a helper's attack, through a streamed turn); it is the web's 503, as a tool error.
    from app.actions.list_posts import ListPosts
    from app.auth import find_token
    from app.mcp import _call, _in_app, _unavailable

    def away(self, ctx, input):
        raise sa.exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00")

    monkeypatch.setattr(ListPosts, "handle", away)
    with app.app_context():
        token_id = find_token(clients["alice"]).id
    params = types.CallToolRequestParams(name="list_posts", arguments={})
    result = run(_in_app(app, _call, token_id, params, unavailable=_unavailable))
    assert result.is_error and result.content[0].text == UNAVAILABLE


def test_two_first_calls_at_once_share_the_channels_one_conversation(app, monkeypatch):
    # Both found none, both started one: the second's INSERT meets the first's, committed by
    # another process between the second's look and its INSERT, on the key's unique index. It was
    # a 500 ("Internal server error" over MCP, 1 call in 8 in a helper's attack); the second call
    # now takes the first's conversation.
    from app.copilot import starting
    from app.models import Conversation

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        rival: list[int] = []
        real_start = starting.start

        def started_meanwhile(user, title=None, channel_key=None):
            with db.engine.begin() as other:  # (the other call's transaction, committed first)
                values = {"tenant_id": user.tenant_id, "user_id": user.id, "channel_key": channel_key, "title": title}
                rival.append(other.execute(sa.insert(Conversation).values(**values).returning(Conversation.id)).scalar_one())
            return real_start(user, title, channel_key)

        monkeypatch.setattr(starting, "start", started_meanwhile)
        mine = starting.for_channel(alice, "mcp", "mcp client")
        assert rival and mine.id == rival[0]
        kept = db.session.scalar(sa.select(sa.func.count(Conversation.id)).where(Conversation.channel_key == "mcp"))
        assert kept == 1
