"""A streamed message whose pass the ASGI server runs itself is claimed in the message's own
commit (turns.start's `claim`): what holds when that pass never starts, when the conversation is
busy, and when the request fails after its commit. The turns go to Dramatiq over the test Redis
and nothing takes them: the test runs each pass itself (tests/helpers/turns.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa

from app.copilot import execute, sweep_dead
from app.extensions import db
from app.models import Message, Run
from tests.helpers.turns import (  # noqa: F401 (fixtures)
    api,
    app_config,
    handed_over,
    new_conversation,
    run_pass,
    status_of,
)


def roles_and_texts(app: Any, convo: int) -> list[tuple[str, str]]:
    with app.app_context():
        rows = db.session.execute(
            sa.select(Message.role, Message.text).where(Message.conversation_id == convo).order_by(Message.id)
        )
        return [(str(role), text or "") for role, text in rows]


def test_a_run_claimed_with_its_message_whose_server_died_before_its_pass_ends_interrupted_and_retry_runs_it(app, api, streamed):
    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "what is on my list?")  # claimed; the server dies: no pass
    assert handoff.claimed is not None and status_of(app, handoff.run_id) == "running"
    with app.app_context():
        assert [r.id for r in sweep_dead(3600)] == []  # not yet silent for the grace period: left alone
        assert [r.id for r in sweep_dead(0)] == [handoff.run_id]
    assert status_of(app, handoff.run_id) == "interrupted"
    assert roles_and_texts(app, convo)[-1][0] == "error"  # with Retry; the person's message kept
    client, headers = api
    retried = client.post(f"/api/conversations/{convo}/retry", json={}, headers={**headers, "Prefer": "respond-async"})
    assert retried.status_code == 202, retried.get_json()
    streamed.enqueue("Two posts.")
    run_pass(app, handoff.run_id)
    assert status_of(app, handoff.run_id) == "done"
    assert roles_and_texts(app, convo) == [
        ("user", "what is on my list?"),
        ("notice", roles_and_texts(app, convo)[1][1]),  # (the interruption's note stays, without Retry)
        ("assistant", "Two posts."),
    ]


def test_a_message_while_a_pass_of_its_conversation_runs_is_not_claimed_and_runs_after_it(app, api, streamed):
    convo = new_conversation(api)
    first = handed_over(app, api, convo, "first")
    second = handed_over(app, api, convo, "second")
    assert first.claimed is not None
    assert second.claimed is None and status_of(app, second.run_id) == "queued"  # behind the running pass
    asyncio.run(execute(app, second.run_id, second.claimed))  # the server's pass of it: claims nothing
    assert status_of(app, second.run_id) == "queued"
    streamed.enqueue("One.")
    streamed.enqueue("Two.")
    asyncio.run(execute(app, first.run_id, first.claimed))  # ends, and queues the second (to the workers)
    run_pass(app, second.run_id)  # as the worker that takes it
    assert [status_of(app, h.run_id) for h in (first, second)] == ["done", "done"]
    assert [text for role, text in roles_and_texts(app, convo)] == ["first", "second", "One.", "Two."]


def test_a_claimed_run_whose_request_failed_after_its_commit_still_runs_on_the_server(app, api, streamed):
    from app.api.turn_server import TurnServer

    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "hello")
    streamed.enqueue("Hello.")

    async def give_up() -> None:  # as __call__ does when the view's answer is not its stream
        server = TurnServer(app)
        server._give_up(handoff)
        assert len(server.passes) == 1  # its pass, here: no worker could claim a running run
        await asyncio.gather(*server.passes)

    asyncio.run(give_up())
    assert status_of(app, handoff.run_id) == "done"
    with app.app_context():
        assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == "done"
    assert roles_and_texts(app, convo)[-1] == ("assistant", "Hello.")
