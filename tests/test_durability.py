"""What waits for the disk (docs/production.md, "What a power cut may take"). On SQLite (WAL), a
pass's own bookkeeping (its claim, its progress, its end) commits without waiting for the disk:
a power cut may take the last of it, whole and in order, and the run then reads queued or running
(the sweep ends it interrupted). What someone outside has been told of waits: the person's message
before its 202, an action's work before the model reads its result, a card's claim before
handle(). PostgreSQL always waits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Post
from tests.helpers.turns import api, app_config, new_conversation, run_pass, send, status_of  # noqa: F401 (fixtures)

FULL, NORMAL = 2, 1  # PRAGMA synchronous


@pytest.fixture
def commits(app: Any) -> Any:
    """commits() → a context manager yielding, for each commit inside it, the first statement the
    transaction wrote (its verb and table) and SQLite's synchronous setting as it committed."""
    with app.app_context():
        engine = db.engine
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL always waits for its WAL's flush: nothing here changes it")
    seen: list[tuple[str, int]] | None = None
    first: dict[int, str] = {}

    def statement(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        verb = sql.split(None, 1)[0].upper()
        if verb in ("INSERT", "UPDATE", "DELETE"):
            first.setdefault(id(conn.connection.dbapi_connection), " ".join(sql.split()[:3]))

    def commit(conn: Any) -> None:
        raw = conn.connection.dbapi_connection
        wrote = first.pop(id(raw), None)
        if seen is not None and wrote is not None:
            seen.append((wrote, raw.execute("PRAGMA synchronous").fetchone()[0]))

    sa.event.listen(engine, "before_cursor_execute", statement)
    sa.event.listen(engine, "commit", commit)

    @contextmanager
    def watching() -> Iterator[list[tuple[str, int]]]:
        nonlocal seen
        seen = []
        try:
            yield seen
        finally:
            seen = None

    yield watching
    sa.event.remove(engine, "before_cursor_execute", statement)
    sa.event.remove(engine, "commit", commit)


def settings_of_the_pool(app: Any) -> set[int]:
    """PRAGMA synchronous of every connection the pool holds now (checked in)."""
    with app.app_context():
        pool = db.engine.pool
        held = [pool.connect() for _ in range(pool.checkedin())]
        try:
            return {c.dbapi_connection.execute("PRAGMA synchronous").fetchone()[0] for c in held}
        finally:
            for connection in held:
                connection.close()


def test_a_message_waits_for_the_disk_and_its_pass_bookkeeping_does_not(app, api, commits, streamed):
    convo = new_conversation(api)
    with commits() as seen:
        run_id = send(api, convo, "hello there")["run"]
    assert [synchronous for _, synchronous in seen] == [FULL], seen  # the person's message, its run and title, before the 202
    streamed.enqueue("Hello, how can I help?")
    with commits() as seen:
        run_pass(app, run_id)
    assert status_of(app, run_id) == "done"
    assert seen == [("UPDATE runs SET", NORMAL), ("UPDATE runs SET", NORMAL)], seen  # the claim, the end
    assert settings_of_the_pool(app) == {FULL}  # each connection waits again once back in the pool


def test_an_actions_work_waits_for_the_disk_before_the_model_reads_its_result(app, api, commits, streamed):
    convo = new_conversation(api)
    run_id = send(api, convo, "Draft a post, please")["run"]
    streamed.enqueue("Drafting.", calls=[("draft_post", {"title": "Power cut", "body": "Kept.", "status": "draft"})])
    streamed.enqueue("Saved as a draft.")
    with commits() as seen:
        run_pass(app, run_id)
    assert status_of(app, run_id) == "done"
    with app.app_context():
        assert db.session.scalar(sa.select(Post.title).where(Post.title == "Power cut")) == "Power cut"
    assert ("INSERT INTO posts", FULL) in seen, seen  # the tool's own commit
    assert seen[0] == ("UPDATE runs SET", NORMAL), seen  # the claim
    assert seen[-1][1] == NORMAL, seen  # the end
    assert settings_of_the_pool(app) == {FULL}


def test_a_confirm_waits_for_the_disk_at_every_commit(app, api, commits, posts):
    convo = new_conversation(api)
    run_id = send(api, convo, f"/delete_post post={posts['Spring meetup']}")["run"]
    run_pass(app, run_id)
    client, headers = api
    card = client.get(f"/api/conversations/{convo}", headers=headers).get_json()["pending"][0]
    with commits() as seen:
        answer = client.post(
            f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers={**headers, "Prefer": "respond-async"}
        )
    assert answer.get_json()["status"] == "done", answer.get_json()
    # the claim (before handle(): at most once, even across a power cut), the outcome, the run queued
    assert [synchronous for _, synchronous in seen] == [FULL, FULL, FULL], seen


def test_a_transaction_already_writing_stays_synced(app, commits):
    from app.extensions import unsynced

    with app.app_context():
        db.session.execute(sa.update(Post).where(Post.id == -1).values(title="nothing"))
        unsynced()  # too late: SQLite cannot change it inside a transaction that writes
        raw = db.session.connection().connection.dbapi_connection
        assert raw.execute("PRAGMA synchronous").fetchone()[0] == FULL
        db.session.rollback()


KILLED_AFTER_COMMIT = """
import os, sys
import sqlalchemy as sa
from app import create_app
from app.extensions import db, unsynced
from app.models import Post
from tests.conftest import base_config
app = create_app(base_config(sys.argv[1]))
with app.app_context():
    unsynced()
    db.session.execute(sa.update(Post).where(Post.id == int(sys.argv[2])).values(title="Kept by the OS"))
    synchronous = db.session.connection().connection.dbapi_connection.execute("PRAGMA synchronous").fetchone()[0]
    db.session.commit()
    print(synchronous, flush=True)
    os._exit(0)  # as a killed process: no close, no checkpoint, nothing flushed by Python
"""


def test_a_commit_that_did_not_wait_survives_its_process_being_killed(app, database_url, commits, posts):
    # Not waiting for the disk trades only a power cut's last commits: a crashed or killed process
    # loses nothing it committed (the operating system still writes what it was handed).
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_COMMIT, database_url, str(posts["Spring meetup"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == str(NORMAL), done.stderr[-2000:]
    with app.app_context():
        db.session.remove()
        assert db.session.get(Post, posts["Spring meetup"]).title == "Kept by the OS"  # type: ignore[union-attr]
