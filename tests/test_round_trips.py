"""What a turn costs, counted, so it cannot creep back (issue 25): the SQL statements, commits and
Redis round trips of a message (the POST, `Prefer: respond-async`), of a pass (the job, run here
as the worker runs it) and of a confirm. Counts, not timings: each pin is exact or a bound that
a change which adds a statement or a round trip breaks. The turns go to Dramatiq over the test
Redis (nothing takes them: the test runs each pass itself, as the worker would). Issue 26: a
confirm was 17 statements (the approval read, then claimed; the post read three times; the run
and its step's cards read before the run was queued), a message 7."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from redis.connection import AbstractConnection
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import User
from tests.conftest import api_headers
from tests.helpers.turns import (  # noqa: F401 (fixtures)
    api,
    app_config,
    handed_over,
    new_conversation,
    run_pass,
    send,
    status_of,
)


@dataclass
class Count:
    """What ran while counting: SQL statements by verb, commits, and Redis round trips (one per
    request written to a connection: a pipeline's commands go in one)."""

    sql: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    redis: list[str] = field(default_factory=list)
    orm: int = 0  # statements run through the session's ORM layer (session.execute and its kin)
    flushes: int = 0  # the session's flushes that wrote something (its unit of work)

    @property
    def statements(self) -> int:
        return sum(self.sql.values())

    def __str__(self) -> str:
        orm = f"{self.orm} through the ORM, {self.flushes} flushes"
        return f"SQL {dict(self.sql)} ({orm}), {self.commits} commits, Redis {self.redis}"


@pytest.fixture
def counting(app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """counting() → a context manager that yields a Count of what ran inside it."""
    live: list[Count] = []

    def statement(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        for c in live:
            c.sql[sql.split(None, 1)[0].upper()] += 1

    def commit(conn: Any) -> None:
        for c in live:
            c.commits += 1

    def orm(state: Any) -> None:
        for c in live:
            c.orm += 1

    def flushed(session: Any, context: Any) -> None:
        for c in live:
            c.flushes += 1

    real = AbstractConnection.send_packed_command

    def send(self: Any, command: Any, check_health: bool = True) -> None:
        for c in live:
            c.redis.append(_names(command))
        return real(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", send)
    with app.app_context():
        engine = db.engine
    sa.event.listen(engine, "before_cursor_execute", statement)
    sa.event.listen(engine, "commit", commit)
    sa.event.listen(Session, "do_orm_execute", orm)
    sa.event.listen(Session, "after_flush", flushed)

    @contextmanager
    def count() -> Iterator[Count]:
        c = Count()
        live.append(c)
        try:
            yield c
        finally:
            live.remove(c)

    yield count
    sa.event.remove(engine, "before_cursor_execute", statement)
    sa.event.remove(engine, "commit", commit)
    sa.event.remove(Session, "do_orm_execute", orm)
    sa.event.remove(Session, "after_flush", flushed)


def _names(command: Any) -> str:
    """The command names of one packed request ("EVALSHA", or "MULTI+ZADD+…" for a pipeline)."""
    chunks = command if isinstance(command, list | tuple) else [command]
    raw = b"".join(c if isinstance(c, bytes) else bytes(c) for c in chunks)
    names = []
    for part in raw.split(b"\r\n*")[0:]:
        lines = part.split(b"\r\n")
        # RESP: *<n>, $<len>, NAME, …: the name is the line after the first length
        for i, line in enumerate(lines):
            if line.startswith(b"$"):
                names.append(lines[i + 1].decode(errors="replace").upper())
                break
    return "+".join(names)


def with_lock(app: Any, **verbs: int) -> dict[str, int]:
    """These statements, and the conversation's lock (turns._runs.hold_live): a `SELECT … FOR
    UPDATE` on PostgreSQL, on SQLite an UPDATE that changes nothing (SQLite has no row locks)."""
    with app.app_context():
        lock = "UPDATE" if db.engine.dialect.name == "sqlite" else "SELECT"
    return {**verbs, lock: verbs.get(lock, 0) + 1}


def warmed(api: Any) -> int:
    """A conversation, after one message in another (first connections are made then, not counted)."""
    send(api, new_conversation(api), "warm up")
    return new_conversation(api)


def test_a_first_message_costs_its_statements_one_commit_and_its_round_trips(app, api, counting):
    convo = warmed(api)
    with counting() as c:
        send(api, convo, "hello there")
    # the token (with its person and their tenant), the conversation, its lock (with the last
    # run's toolsets); the message and its run; the title
    assert c.sql == with_lock(app, SELECT=2, INSERT=2, UPDATE=1), c
    # the token's and the conversation's reads are the ORM's (objects the request goes on with); the
    # message, its run and the title are written as Core (a third of the CPU of the ORM's flush)
    assert c.orm == 2 and c.flushes == 0, c
    assert c.commits == 1, c
    # the event cursor, the title's event, the job queued
    assert c.redis == ["XREVRANGE", "EVALSHA", "EVALSHA"], c


def test_a_streamed_message_handed_to_the_asgi_server_costs_a_message_its_claim_and_its_stream_place_and_no_job(
    app, api, counting
):
    convo = warmed(api)
    with counting() as c:
        handoff = handed_over(app, api, convo)
    assert handoff.claimed is not None and status_of(app, handoff.run_id) == "running"
    # as a plain message: the token, the conversation, its lock; the message and its run; the
    # title; and the run's claim for this server (the conditional UPDATE), in the same commit
    assert c.sql == with_lock(app, SELECT=2, INSERT=2, UPDATE=2), c
    assert c.commits == 1, c
    # the stream's place among the person's and the event cursor, in one round trip; the title's
    # event; no job: the pass is the server's
    assert c.redis == ["MULTI+ZREMRANGEBYSCORE+ZADD+ZCARD+EXPIRE+XREVRANGE+EXEC", "EVALSHA"], c


def test_the_asgi_servers_pass_of_a_run_claimed_with_its_message_reads_no_run_and_claims_nothing(app, api, counting, streamed):
    from app.copilot import execute

    warm = handed_over(app, api, warmed(api))
    asyncio.run(execute(app, warm.run_id, warm.claimed))
    handoff = handed_over(app, api, new_conversation(api))
    streamed.enqueue("Hello, how can I help?")
    with counting() as c:
        asyncio.run(execute(app, handoff.run_id, handoff.claimed))
    assert status_of(app, handoff.run_id) == "done"
    # a queued pass's (below) less its claim's UPDATE and commit, and less the news: read (the
    # conversation's history while the claim still stands, and whether news waits before the
    # message: none here, so none is read), end (the run, the history, the reply), the turn
    # listeners' look-up, the conversation's next pass
    assert c.sql == {"SELECT": 3, "UPDATE": 2, "INSERT": 1}, c
    assert c.orm == 0 and c.flushes == 0, c  # each as Core on the session's connection (extensions.core): a third of the CPU
    assert c.commits == 2, c  # the read, the end
    assert c.redis == ["EVALSHA"] * 4, c


def test_the_asgi_servers_stream_renders_its_passs_title_and_end_from_what_the_pass_wrote(app, api, counting, streamed):
    """The title and the end's messages go to the stream as they were committed (Event.known):
    its render reads only the pending prompts, and says what a render read from Redis says."""
    from app.api.streamed import SERVER
    from app.api.turn_server import Exchange, TurnServer
    from app.copilot import events, execute

    warm = handed_over(app, api, warmed(api))
    asyncio.run(execute(app, warm.run_id, warm.claimed))
    convo = new_conversation(api)
    client, headers = api
    streamed.enqueue("Hello, how can I help?")

    async def turn() -> tuple[Any, list[Any]]:
        exchange = Exchange(TurnServer(app), asyncio.get_running_loop())
        answer = client.post(
            f"/api/conversations/{convo}/messages",
            json={"text": "hello there"},
            headers={**headers, "Accept": "text/event-stream"},
            environ_base={SERVER: exchange},
        )
        assert answer.status_code == 200, answer.get_data(as_text=True)
        handoff = exchange.taken
        assert handoff is not None and handoff.run_id is not None and handoff.claimed is not None
        await execute(app, handoff.run_id, handoff.claimed)
        got = []
        while not handoff.tap.queue.empty():
            got.append(handoff.tap.queue.get_nowait())
        handoff.cancel()
        return handoff, got

    handoff, handed = asyncio.run(turn())
    assert [e.type for e in handed][0] == "title" and handed[-1].ends_turn(), handed
    with app.app_context():
        from_redis = {e.id: e for e in events.read(convo, handoff.after, None)}
        assert list(from_redis) == [e.id for e in handed] and all(e.known is None for e in from_redis.values())
        for event in handed:
            with counting() as c:
                rendered = handoff.render(event)
            db.session.rollback()
            # an end reads the pending prompts alone (its messages are the pass's own); a title nothing
            assert c.sql == ({"SELECT": 1} if event.ends_turn() else {}), (event.type, c)
            assert rendered == handoff.render(from_redis[event.id]), event.type
        _, end = handoff.render(handed[-1])
    assert json.loads(end)["messages"] == [{"role": "assistant", "text": "Hello, how can I help?"}]


def test_a_pass_that_answers_in_words_costs_its_statements_three_commits_and_four_round_trips(app, api, counting, streamed):
    run_pass(app, send(api, new_conversation(api), "warm up")["run"])
    convo = new_conversation(api)
    run_id = send(api, convo, "hello there")["run"]
    streamed.enqueue("Hello, how can I help?")
    with counting() as c:
        run_pass(app, run_id)
    assert status_of(app, run_id) == "done"
    # claim (the run with its message; the conditional UPDATE), read (the conversation with its
    # person; the news before the message), end (the run, the history, the reply), the turn
    # listeners' look-up, the conversation's next pass
    assert c.sql == {"SELECT": 5, "UPDATE": 3, "INSERT": 1}, c
    assert c.commits == 3, c  # the claim, the read, the end
    # started (with the heartbeat's first beat, unless a stop was asked), the first words at
    # once, the rest with the step's end, the end (forgetting the heartbeat and any stop): no
    # stop look-up for a reply that runs nothing
    assert c.redis == ["EVALSHA"] * 4, c


def test_a_confirm_costs_its_statements_and_round_trips_and_its_continuation_pass_too(app, api, counting, streamed, posts):
    convo = new_conversation(api)
    run_id = send(api, convo, f"/delete_post post={posts['Spring meetup']}")["run"]
    run_pass(app, run_id)
    assert status_of(app, run_id) == "paused"
    client, headers = api
    card = client.get(f"/api/conversations/{convo}", headers=headers).get_json()["pending"][0]
    with counting() as c:
        answer = client.post(
            f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers={**headers, "Prefer": "respond-async"}
        )
    assert answer.status_code == 200 and answer.get_json()["status"] == "done", answer.get_json()
    # the token (with its person and their tenant); the claim, checks and all (one conditional
    # UPDATE … RETURNING the card); the post, read once for authorize(), the card and handle();
    # its DELETE; the outcome and its audit row (the chain's head taken, the row, the head moved);
    # the run queued (one conditional UPDATE: paused, and no open card in its step). (The card's
    # chat line, which the continuation's lines come after, is read only by a reply that waits.)
    assert c.sql == {"SELECT": 2, "UPDATE": 5, "DELETE": 1, "INSERT": 1}, c
    assert c.commits == 3, c  # the claim (before handle(): at most once), the outcome, the run queued
    # the card's two changes on the stream, the continuation queued, the event cursor
    assert c.redis == ["EVALSHA", "EVALSHA", "EVALSHA", "XREVRANGE"], c
    streamed.enqueue("Deleted, as you confirmed.")
    with counting() as c:
        run_pass(app, run_id)
    assert status_of(app, run_id) == "done"
    # the people's answers are not saved as progress before the model is asked (the pass ran no
    # tool: a retry rebuilds them from the cards)
    assert c.sql == {"SELECT": 5, "UPDATE": 3, "INSERT": 1}, c
    assert c.commits == 3, c
    # one stop look-up: before the calls the cards answered are handed back to the model
    assert c.redis == ["EVALSHA", "EXISTS", "EVALSHA", "EVALSHA", "EVALSHA"], c


def _card(app: Any, api: Any, posts: dict[str, int]) -> tuple[int, dict[str, Any]]:
    """A run paused on a delete_post card of alice's, and the card as the API shows it to `api`."""
    convo = new_conversation(api)
    run_id = send(api, convo, f"/delete_post post={posts['Spring meetup']}")["run"]
    run_pass(app, run_id)
    client, headers = api
    return run_id, client.get(f"/api/conversations/{convo}", headers=headers).get_json()["pending"][0]


def test_a_confirm_the_one_statement_claim_refuses_is_checked_one_by_one_and_audited(app, api, counting, posts):
    """The claim with every check in its WHERE claims nothing for a credential outside the card's
    toolsets: then the checks run one by one, the refusal says which and is audited, nothing ran."""
    from app.auth import create_token
    from app.copilot.approvals import sign
    from app.models import ApiToken, Approval, AuditEvent, Post

    _, card = _card(app, api, posts)
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        limited = create_token(alice, scope="client", toolsets="mail")
        limited_id = db.session.scalar(sa.select(sa.func.max(ApiToken.id)))
        with app.test_request_context():
            token = sign(db.session.get(Approval, card["id"]), f"pat:{limited_id}")  # as if it had been given one
    client, _ = api
    with counting() as c:
        answer = client.post(f"/api/approvals/{card['id']}/confirm", json={"token": token}, headers=api_headers(limited))
    assert answer.status_code == 403 and answer.get_json()["error"] == "OutsideToolsets", answer.get_json()
    assert c.sql["UPDATE"] >= 1 and c.sql["SELECT"] >= 2, c  # the claim that claimed nothing, then the approval read
    with app.app_context():
        assert db.session.get(Approval, card["id"]).status == "pending"  # type: ignore[union-attr]
        assert db.session.get(Post, posts["Spring meetup"]) is not None
        refused = db.session.scalars(sa.select(AuditEvent.detail).where(AuditEvent.approval_id == card["id"]))
        assert "outside_toolsets" in list(refused)


def test_a_second_confirm_claims_nothing_and_is_told_who_decided(app, api, posts):
    _, card = _card(app, api, posts)
    client, headers = api
    headers = {**headers, "Prefer": "respond-async"}
    first = client.post(f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers=headers)
    again = client.post(f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers=headers)
    assert first.status_code == 200 and first.get_json()["status"] == "done"
    assert again.status_code == 409 and "You already" in again.get_json()["message"], again.get_json()


def test_a_context_reads_a_record_once_until_a_commit_or_a_delete(app, counting, posts):
    """authorize(), the card and handle() of one confirm ask for the same record: one SELECT."""
    from app.copilot.actions import ActionContext
    from app.errors import NotFound
    from app.models import Post

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        ctx = ActionContext(user=alice, tenant=alice.tenant, db=db.session)
        with counting() as c:
            first = ctx.find(Post, posts["Spring meetup"])
            assert ctx.find(Post, posts["Spring meetup"]) is first
            assert first.title == "Spring meetup"
        assert c.statements == 1, c
        db.session.commit()  # expires what the session holds: read again
        with counting() as c:
            assert ctx.find(Post, posts["Spring meetup"]).title == "Spring meetup"
        assert c.sql["SELECT"] >= 1, c
        db.session.delete(first)
        with pytest.raises(NotFound):
            ctx.find(Post, posts["Spring meetup"])
        db.session.rollback()
        carol = db.session.scalar(sa.select(User).where(User.email == "carol@example.com"))
        with pytest.raises(NotFound):  # another tenant's context never has it
            ActionContext(user=carol, tenant=carol.tenant, db=db.session).find(Post, posts["Launch notes"])


def test_an_event_stream_opens_with_one_look_back(app, api, counting):
    convo = warmed(api)
    send(api, convo, "hello there")  # (an event in the stream: the title's)
    client, headers = api
    # (it ends by itself after a second: long enough that a busy machine still reaches its first wait)
    app.config["EVENTS_STREAM_SECONDS"] = 1
    client.get(f"/api/conversations/{convo}/events", headers=headers).get_data()  # (the streams' connection made, not counted)
    with counting() as c:
        answer = client.get(f"/api/conversations/{convo}/events", headers=headers)
        assert answer.get_data(as_text=True).startswith("retry:")
        answer.close()  # (as a server does when the stream ends: its close, after the body's end)
    # the token (with its person and their tenant), the conversation
    assert c.sql == {"SELECT": 2}, c
    assert c.commits == 0, c
    # one round trip to open: its place among the person's open streams and where to start (the
    # newest events, with a turn still running among them); the waits for events; its place let
    # go once, though both the body's end and the response's close let it go
    waits = [name for name in c.redis if name == "XREAD"]
    assert waits, c
    assert [name for name in c.redis if name != "XREAD"] == [
        "MULTI+ZREMRANGEBYSCORE+ZADD+ZCARD+EXPIRE+XREVRANGE+EXEC",
        "ZREM",
    ], c


def test_the_apps_redis_replies_are_parsed_by_hiredis_through_a_small_buffer(app):
    """redis-py's C parser (the `hiredis` dependency) reads every reply of the app's Redis clients:
    an event stream's XREAD and XREVRANGE in about half the CPU of the pure-Python parser. Its
    buffer, held as long as the connection (an open stream holds one), is 4 KB, not 64."""
    from app.copilot import events
    from app.extensions import READ_SIZE, redis_client

    with app.app_context():
        for client in (redis_client.client, events._blocking_client()):
            connection = client.connection_pool.get_connection()
            try:
                assert type(connection._parser).__name__ == "_HiredisParser"
                assert len(connection._parser._buffer) == READ_SIZE == 4096
            finally:
                client.connection_pool.release(connection)


def test_a_reply_longer_than_the_read_buffer_comes_whole(app):
    from app.copilot import events
    from app.extensions import READ_SIZE, redis_client

    with app.app_context():
        text = "x" * 700  # ten of them: about twice the buffer
        for _ in range(10):
            events.publish(424242, "text", run=1, step=1, text=text)
        read = events.read(424242, "0-0", None)
        assert [e.data["text"] for e in read] == [text] * 10
        assert sum(len(e.data["text"]) for e in read) > READ_SIZE
        redis_client.client.delete(events.key(424242))


def test_a_postgresql_transaction_waits_on_the_server_for_its_begin_its_statements_and_its_commit_only(app, tmp_path):
    """On checkout a pooled connection is tested by its transaction's BEGIN (app/pg_checkout.py):
    no ping of its own before it (SQLAlchemy's pool_pre_ping sent a SELECT 1 first, then psycopg
    its BEGIN: two waits on the server before the first statement). Read off libpq's own trace of
    the messages a pooled connection sent: each `Query` and each `Sync` waits for the server."""
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        pytest.skip("PostgreSQL's round trips are counted in the suite's PostgreSQL pass")
    from psycopg import pq

    trace = tmp_path / "libpq-trace"
    made: list[Any] = []

    def alice() -> None:
        assert db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com")) is not None
        db.session.commit()

    with app.app_context(), open(trace, "w") as out:
        db.engine.dispose()
        sa.event.listen(db.engine, "connect", lambda dbapi_connection, _record: made.append(dbapi_connection))
        alice()  # a new connection (SQLAlchemy pings none that it just made), back to the pool
        assert len(made) == 1
        made[0].pgconn.trace(out.fileno())
        made[0].pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            alice()  # the same connection, checked out of the pool
        finally:
            made[0].pgconn.untrace()
            db.session.remove()
            db.engine.dispose()
    assert len(made) == 1
    sent = [line.split("\t")[2].split(" ")[0] for line in trace.read_text().splitlines() if line.startswith("F\t")]
    waits = [message for message in sent if message in ("Query", "Sync")]
    assert waits == ["Query", "Sync", "Query"], sent  # BEGIN; the SELECT; COMMIT
    assert '"BEGIN"' in trace.read_text().split("Sync")[0], "the transaction's BEGIN comes first, as the checkout's test"


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "AUTOCOMMIT"])
def test_a_postgresql_connection_with_its_own_isolation_level_is_pinged_and_keeps_it(app, isolation):
    """A deployment's own isolation level (SQLALCHEMY_ENGINE_OPTIONS) is psycopg's to begin with:
    the checkout's test is then a plain SELECT 1 outside any transaction, and the level holds."""
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        pytest.skip("PostgreSQL's checkouts are tested in the suite's PostgreSQL pass")
    from app.pg_checkout import begin_on_checkout

    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"], isolation_level=isolation)
    begin_on_checkout(engine)
    try:
        for _ in range(2):  # a new connection, then the same one out of the pool
            with engine.connect() as connection:
                level = connection.scalar(sa.text("SHOW transaction_isolation"))
                in_transaction = connection.scalar(sa.text("SELECT now() <> statement_timestamp()"))
                connection.rollback()
            assert level == ("repeatable read" if isolation == "REPEATABLE READ" else "read committed")
            assert in_transaction is (isolation != "AUTOCOMMIT")
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "options",
    [{"isolation_level": "SERIALIZABLE"}, {"isolation_level": "AUTOCOMMIT"}, {"postgresql_readonly": True}],
    ids=["serializable", "autocommit", "read-only"],
)
def test_a_postgresql_connection_given_its_own_isolation_after_checkout_has_it(app, options):
    """`connection.execution_options(isolation_level=…)` (and an engine's) after the checkout began
    the transaction: that empty transaction gives way, and the setting holds (psycopg refused it
    inside one: "can't change 'autocommit' now")."""
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        pytest.skip("PostgreSQL's checkouts are tested in the suite's PostgreSQL pass")
    from app.pg_checkout import begin_on_checkout

    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
    begin_on_checkout(engine)
    try:
        given = (lambda: engine.connect().execution_options(**options), lambda: engine.execution_options(**options).connect())
        for opened in given:
            for _ in range(2):  # a new connection, then the same one out of the pool
                with opened() as connection:
                    level = connection.scalar(sa.text("SHOW transaction_isolation"))
                    read_only = connection.scalar(sa.text("SHOW transaction_read_only"))
                    in_transaction = connection.scalar(sa.text("SELECT now() <> statement_timestamp()"))
                    connection.rollback()
                assert level == ("serializable" if options.get("isolation_level") == "SERIALIZABLE" else "read committed")
                assert read_only == ("on" if options.get("postgresql_readonly") else "off")
                assert in_transaction is (options.get("isolation_level") != "AUTOCOMMIT")
                with engine.connect() as plain:  # and the pool's next checkout is as before
                    assert plain.scalar(sa.text("SHOW transaction_isolation")) == "read committed"
                    assert plain.scalar(sa.text("SHOW transaction_read_only")) == "off"
    finally:
        engine.dispose()
