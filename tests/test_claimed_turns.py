"""A streamed message whose pass the ASGI server runs itself is claimed in the message's own
commit (turns.start's `claim`): what holds when that pass never starts or starts too late, when
the conversation is busy (also with a card's continuation claimed by a worker while the message
is being written), when a Stop comes before the pass, and when the request fails after its
commit. The turns go to Dramatiq over the test Redis and nothing takes them: the test runs each
pass itself (tests/helpers/turns.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from app.copilot import execute, sweep_dead
from app.extensions import db
from app.models import Message, Run, utcnow
from app.status import Role, RunNext, RunStatus
from tests.helpers.turns import (  # noqa: F401 (fixtures)
    api,
    app_config,
    handed_over,
    new_conversation,
    run_pass,
    status_of,
)
from tests.services import eventually


def roles_and_texts(app: Any, convo: int) -> list[tuple[str, str]]:
    with app.app_context():
        rows = db.session.execute(
            sa.select(Message.role, Message.text).where(Message.conversation_id == convo).order_by(Message.id)
        )
        return [(str(role), text or "") for role, text in rows]


def test_a_run_claimed_with_its_message_whose_server_died_before_its_pass_ends_interrupted_and_retry_runs_it(app, api, streamed):
    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "what is on my list?")  # claimed; the server dies: no pass
    assert handoff.claimed is not None and status_of(app, handoff.run_id) == RunStatus.RUNNING
    with app.app_context():
        assert [r.id for r in sweep_dead(3600)] == []  # not yet silent for the grace period: left alone
        assert [r.id for r in sweep_dead(0)] == [handoff.run_id]
    assert status_of(app, handoff.run_id) == RunStatus.INTERRUPTED
    with app.app_context():  # (not "the worker": this pass was the ASGI process's)
        assert (
            "worker" not in db.session.get(Run, handoff.run_id).error
            and "no heartbeat" in db.session.get(Run, handoff.run_id).error
        )
    assert roles_and_texts(app, convo)[-1][0] == Role.ERROR  # with Retry; the person's message kept
    client, headers = api
    retried = client.post(f"/api/conversations/{convo}/retry", json={}, headers={**headers, "Prefer": "respond-async"})
    assert retried.status_code == 202, retried.get_json()
    streamed.enqueue("Two posts.")
    run_pass(app, handoff.run_id)
    assert status_of(app, handoff.run_id) == RunStatus.DONE
    said = roles_and_texts(app, convo)
    assert [role for role, _ in said] == [
        Role.USER,
        Role.NOTICE,
        Role.ASSISTANT,
    ]  # (the interruption's note stays, without Retry)
    assert said[0][1] == "what is on my list?" and "interrupted" in said[1][1] and said[2][1] == "Two posts."


def test_a_message_while_a_pass_of_its_conversation_runs_is_not_claimed_and_runs_after_it(app, api, streamed):
    convo = new_conversation(api)
    first = handed_over(app, api, convo, "first")
    second = handed_over(app, api, convo, "second")
    assert first.claimed is not None
    assert second.claimed is None and status_of(app, second.run_id) == RunStatus.QUEUED  # behind the running pass
    asyncio.run(execute(app, second.run_id, second.claimed))  # the server's pass of it: claims nothing
    assert status_of(app, second.run_id) == RunStatus.QUEUED
    streamed.enqueue("One.")
    streamed.enqueue("Two.")
    asyncio.run(execute(app, first.run_id, first.claimed))  # ends, and queues the second (to the workers)
    run_pass(app, second.run_id)  # as the worker that takes it
    assert [status_of(app, h.run_id) for h in (first, second)] == [RunStatus.DONE, RunStatus.DONE]
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
    assert status_of(app, handoff.run_id) == RunStatus.DONE
    with app.app_context():
        assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == RunStatus.DONE
    assert roles_and_texts(app, convo)[-1] == (Role.ASSISTANT, "Hello.")


def test_a_pass_that_begins_after_the_sweep_ended_its_run_and_a_retry_queued_it_runs_nothing(app, api, streamed):
    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "what is on my list?")
    with app.app_context():
        assert [r.id for r in sweep_dead(0)] == [handoff.run_id]  # its server looked dead
    client, headers = api
    retried = client.post(f"/api/conversations/{convo}/retry", json={}, headers={**headers, "Prefer": "respond-async"})
    assert retried.status_code == 202, retried.get_json()
    streamed.enqueue("Two posts.")
    asyncio.run(execute(app, handoff.run_id, handoff.claimed))  # the server's pass, begun too late
    assert len(streamed.requests) == 0 and status_of(app, handoff.run_id) == RunStatus.QUEUED  # the claim no longer stood
    run_pass(app, handoff.run_id)  # the worker the retry queued it to
    assert len(streamed.requests) == 1 and status_of(app, handoff.run_id) == RunStatus.DONE
    assert roles_and_texts(app, convo)[-1] == (Role.ASSISTANT, "Two posts.")


def test_a_stop_between_the_messages_commit_and_its_pass_stops_it_before_the_model_is_asked(app, api, streamed):
    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "hello")
    client, headers = api
    stopping = client.post(f"/api/conversations/{convo}/stop", json={}, headers=headers)
    assert stopping.status_code == 200 and stopping.get_json() == {"run": handoff.run_id, "stopping": True}
    streamed.enqueue("Never said.")
    asyncio.run(execute(app, handoff.run_id, handoff.claimed))
    assert status_of(app, handoff.run_id) == RunStatus.STOPPED and len(streamed.requests) == 0
    assert roles_and_texts(app, convo)[-1] == (Role.NOTICE, "Stopped. Nothing ran.")


_LOCK_WAITERS = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")


def test_a_continuation_claimed_by_a_worker_while_a_message_claims_its_own_run_waits_for_it(app, api, monkeypatch):
    """A run paused on its card is resumed and a worker claims it while another message of the
    conversation is being written and has claimed its own run, not yet committed: the worker's
    claim waits for that transaction and then sees its run running (PostgreSQL lets two UPDATEs
    of different rows pass each other: the claim locks the conversation first). One pass at a time."""
    from app.copilot.turns import _line, _runs

    convo = new_conversation(api)
    with app.app_context():
        paused = Run(
            conversation_id=convo,
            status=RunStatus.PAUSED,
            step=1,
            next=RunNext.RESULTS,
            queued_at=utcnow() - timedelta(minutes=1),
        )
        db.session.add(paused)
        db.session.commit()
        paused_id = paused.id
    commit = _runs.commit_kept
    other: dict[str, Any] = {}

    def card_answered_and_worker_claims() -> None:
        with app.app_context():
            other["resumed"] = _runs.resume_if_ready(paused_id) is not None
            other["claimed"] = _line.claim(paused_id) is not None
            db.session.remove()

    def waits_on_a_lock() -> bool:
        with db.engine.connect() as watcher:  # (a connection of its own, beside the message's transaction)
            return bool(watcher.scalar(_LOCK_WAITERS))

    def commit_once_the_other_went(*args: Any, **kwargs: Any) -> None:
        if threading.current_thread() is threading.main_thread() and "thread" not in other:
            other["thread"] = threading.Thread(target=card_answered_and_worker_claims)
            other["thread"].start()
            # PostgreSQL: this commit waits until the other has either ended (its claim won: two
            # passes) or waits on a lock (on this transaction's). SQLite's writers take turns: its
            # resume waits on this transaction, whatever the order, and nothing is waited for here.
            if db.engine.dialect.name == "postgresql":
                eventually(lambda: not other["thread"].is_alive() or waits_on_a_lock(), "the worker's claim done or waiting")
        commit(*args, **kwargs)

    monkeypatch.setattr(_runs, "commit_kept", commit_once_the_other_went)
    handoff = handed_over(app, api, convo, "hello")
    other["thread"].join()
    assert handoff.claimed is not None and other == {**other, "resumed": True, "claimed": False}
    with app.app_context():
        statuses = dict(db.session.execute(sa.select(Run.id, Run.status).where(Run.conversation_id == convo)).all())
    assert statuses == {paused_id: RunStatus.QUEUED, handoff.run_id: RunStatus.RUNNING}  # behind the message's pass


def test_a_streamed_message_is_served_on_the_servers_loop(app, api):
    """The request of a streamed message runs on the ASGI server's loop (requests in threads take
    the GIL from the loop that starts the passes: bench/README, 2026-12-07), never waiting there
    for a lock (tests/test_streamed_turns.py holds one), on PostgreSQL and on SQLite alike."""
    from app.api.turn_server import TurnServer

    convo = new_conversation(api)

    async def serve() -> tuple[list[dict[str, Any]], int]:
        server = TurnServer(app)
        sent = await streamed(server, api, convo)
        return sent, len(server.dispatchers._threads)  # (a pool's threads start with its first job)

    sent, threads = asyncio.run(serve())
    assert sent[0]["status"] == 200
    assert b'"state": "done"' in b"".join(m.get("body", b"") for m in sent)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.conversation_id == convo)) == 2
    assert threads == 0


def test_after_a_request_on_the_loop_met_a_lock_the_next_streamed_messages_go_straight_to_threads(app, api, monkeypatch):
    """A lock held for seconds meets a burst: tried on the loop one after another, each waiting
    there for the lock (and for a pooled connection the waiting threads hold), 100 messages held
    up the process 4.6 s (bench/README, 2026-12-07). After one try finds a lock, the messages of
    the next LOCK_BACKOFF_S are not tried on the loop; once it is over, they are again."""
    from app.api import turn_server
    from app.models import Conversation

    monkeypatch.setattr(turn_server, "LOCK_BACKOFF_S", 600)  # (long: a busy machine may not outrun it)
    first, second, third = new_conversation(api), new_conversation(api), new_conversation(api)
    tried: list[int] = []

    async def serve() -> list[list[dict[str, Any]]]:
        server = turn_server.TurnServer(app)
        on_loop = server._on_loop

        def counted(environ: dict[str, Any]) -> Any:
            tried.append(int(environ["PATH_INFO"].split("/")[3]))
            return on_loop(environ)

        server._on_loop = counted  # type: ignore[method-assign]
        with app.app_context():
            lock = db.engine.connect()
        try:
            if lock.dialect.name == "sqlite":
                lock.exec_driver_sql("BEGIN IMMEDIATE")
            else:  # (both conversations' rows)
                lock.execute(sa.select(Conversation.id).where(Conversation.id.in_([first, second])).with_for_update())
            waiting = [asyncio.create_task(streamed(server, api, first))]
            await asyncio.to_thread(eventually, lambda: tried == [first] and server.lock_seen_at > 0, "the first try")
            waiting.append(asyncio.create_task(streamed(server, api, second)))
            await asyncio.to_thread(eventually, lambda: len(server.dispatchers._threads) == 2, "both in threads")
        finally:
            lock.rollback()
            lock.close()
        answers = list(await asyncio.gather(*waiting))
        monkeypatch.setattr(turn_server, "LOCK_BACKOFF_S", 0)
        answers.append(await streamed(server, api, third))
        return answers

    answers = asyncio.run(serve())
    assert tried == [first, third]  # (the second, within the back-off, went straight to a thread)
    for sent in answers:
        assert sent[0]["status"] == 200
        assert b'"state": "done"' in b"".join(m.get("body", b"") for m in sent)
    with app.app_context():
        convos = [first, second, third]
        said = sa.select(Message.conversation_id).where(Message.conversation_id.in_(convos), Message.role == Role.USER)
        assert sorted(db.session.scalars(said)) == sorted(convos)  # (each once)


async def streamed(server: Any, api: Any, convo: int) -> list[dict[str, Any]]:
    """A streamed message ("hello") through the ASGI server, in process: what it sent, to the turn's end."""
    import json

    _, headers = api
    asked = {**headers, "Accept": "text/event-stream", "Content-Type": "application/json"}
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/api/conversations/{convo}/messages",
        "query_string": b"",
        "headers": [(name.lower().encode(), value.encode()) for name, value in asked.items()],
    }
    body = [{"type": "http.request", "body": json.dumps({"text": "hello"}).encode()}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if body:
            return body.pop()
        await asyncio.Event().wait()  # (the client stays: the answer ends with the turn)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await server(scope, receive, send)
    return sent


def test_a_request_on_the_loop_waits_briefly_for_sqlites_write_lock_and_its_connection_as_configured_once_back(app):
    """On the loop (extensions.on_loop, no_lock_wait) SQLite's busy timeout is LOOP_LOCK_WAIT_MS:
    a write that finds the lock held longer fails, and the request is undone (WouldWait) for a
    thread to run again; the same connection, back in the pool, waits as configured for whoever
    takes it next."""
    from app.errors import WouldWait
    from app.extensions import LOOP_LOCK_WAIT_MS, OnLoop, core, no_lock_wait, on_loop

    with app.app_context():
        if db.engine.dialect.name != "sqlite":
            pytest.skip("SQLite's busy timeout: the SQLite pass")
        configured = db.session.connection().exec_driver_sql("PRAGMA busy_timeout").scalar()
        db.session.rollback()
        assert configured == 30_000
        holder = db.engine.raw_connection()  # another writer: the whole database's write lock
        holder.execute("BEGIN IMMEDIATE")
        tried = OnLoop()
        tokens = on_loop.set(tried), no_lock_wait.set(True)
        try:
            started = time.monotonic()
            with pytest.raises(WouldWait):
                assert db.session.connection().exec_driver_sql("PRAGMA busy_timeout").scalar() == LOOP_LOCK_WAIT_MS == 10
                core(sa.update(Message).where(Message.id == -1).values(text="x"))
            assert time.monotonic() - started < 10  # (not the configured 30 s)
        finally:
            on_loop.reset(tokens[0])
            no_lock_wait.reset(tokens[1])
            holder.execute("ROLLBACK")
            holder.close()
        assert tried.locks == ["database is locked"]
        db.session.rollback()  # (as the request's teardown does: its connection back in the pool)
        assert db.session.connection().exec_driver_sql("PRAGMA busy_timeout").scalar() == configured
        db.session.rollback()


def test_a_streamed_message_that_meets_a_table_lock_on_the_loop_waits_for_it_in_a_thread_and_is_kept(app, api):
    """Any lock the request meets on the loop, a read's too: on PostgreSQL a whole table locked
    (a migration, `LOCK TABLE`) stops even the read of the caller's credential. Its lock_timeout
    there undoes the request, which waits for the lock in a thread: kept once, never a 503 (a
    helper's attack, 2026-12-07: 79 of 100 such messages refused)."""
    from app.api.turn_server import TurnServer

    convo = new_conversation(api)
    with app.app_context():
        if db.engine.dialect.name != "postgresql":
            pytest.skip("PostgreSQL's table locks (SQLite's readers never wait)")

    async def serve() -> list[dict[str, Any]]:
        server = TurnServer(app)
        with app.app_context():
            lock = db.engine.connect()
        try:
            lock.exec_driver_sql("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE")
            waiting = asyncio.create_task(streamed(server, api, convo))
            await asyncio.to_thread(eventually, lambda: server.lock_seen_at > 0, "the try on the loop undone")
            await asyncio.to_thread(eventually, lambda: len(server.dispatchers._threads) == 1, "the request in a thread")
        finally:
            lock.rollback()
            lock.close()
        return await waiting

    sent = asyncio.run(serve())
    assert sent[0]["status"] == 200
    assert b'"state": "done"' in b"".join(m.get("body", b"") for m in sent)
    with app.app_context():
        said = sa.select(sa.func.count(Message.id)).where(Message.conversation_id == convo, Message.role == Role.USER)
        assert db.session.scalar(said) == 1


def test_a_request_on_the_loop_that_committed_is_never_run_again_for_a_lock_it_meets_after(app, api):
    """Run again in a thread, a request that had committed (its message) would be kept twice: a
    lock it meets after its commit is an error like any other, not WouldWait."""
    from app.errors import WouldWait
    from app.extensions import OnLoop, core, no_lock_wait, on_loop
    from app.models import Conversation

    convo = new_conversation(api)
    retitle = sa.update(Conversation).where(Conversation.id == convo).values(title="Renamed")
    with app.app_context():
        lock = db.engine.connect()
        tried = OnLoop()
        tokens = on_loop.set(tried), no_lock_wait.set(True)
        try:
            core(retitle)
            db.session.commit()
            assert tried.committed
            if lock.dialect.name == "sqlite":
                lock.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                lock.execute(sa.select(Conversation.id).where(Conversation.id == convo).with_for_update())
            with pytest.raises(sa.exc.OperationalError) as raised:
                core(retitle)
            assert not isinstance(raised.value, WouldWait) and tried.locks == []
        finally:
            on_loop.reset(tokens[0])
            no_lock_wait.reset(tokens[1])
            db.session.rollback()
            lock.rollback()
            lock.close()


def test_a_claimed_pass_holds_no_connection_while_the_model_thinks(app, api, streamed):
    """The ASGI server's own pass (its person handed over from the request, not read by the pass)
    holds no pooled connection, no open transaction, across the model's await: the actions'
    context reads the person's tenant, which must come with the claim, not be loaded lazily then
    (that read opened a transaction that waited on the model)."""
    convo = new_conversation(api)
    handoff = handed_over(app, api, convo, "think")
    assert handoff.claimed is not None
    gate = threading.Event()
    streamed.enqueue("thinking", gate=gate)
    passing = threading.Thread(target=lambda: asyncio.run(execute(app, handoff.run_id, handoff.claimed)))
    passing.start()
    try:
        assert streamed.started.wait(30)
        with app.app_context():
            held = db.engine.pool.checkedout()
    finally:
        gate.set()
        passing.join(30)
    assert status_of(app, handoff.run_id) == RunStatus.DONE
    assert held == 0
