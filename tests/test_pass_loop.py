"""A worker's passes (turns/_consume.py): taken from Redis while there is room, run on one event
loop, acknowledged when they end; a stopping worker lets its running passes end, and gives back
(never drops) what it cannot finish."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from werkzeug.wrappers import Response

from app.extensions import db
from app.models import Run, User
from tests.conftest import api_headers
from tests.fake_llm import FakeOpenAI
from tests.services import WAIT, eventually


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def app_config(fake: FakeOpenAI) -> dict[str, Any]:
    return {"TURNS_RUNNER": "dramatiq", "COUNTERSIGN_MODEL": "openai:fake-gpt", "COUNTERSIGN_MODEL_BASE_URL": fake.api_base}


@pytest.fixture
def gate(fake: FakeOpenAI) -> Iterator[threading.Event]:
    """Each answer enqueued with `gated` waits for it (set at the end in any case)."""
    opened = threading.Event()
    yield opened
    opened.set()


def gated(fake: FakeOpenAI, gate: threading.Event, text: str) -> Callable[[dict[str, Any]], Response]:
    def answer(request: dict[str, Any]) -> Response:
        gate.wait(WAIT)
        return Response(fake.stream(fake.reply_text(text), request), content_type="text/event-stream")

    return answer


def queue_turns(app: Any, n: int) -> list[int]:
    """n conversations of Alice's, each with a message whose turn is queued in Redis."""
    from app.auth import create_token

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(alice, scope="client"))
    client, runs = app.test_client(), []
    for i in range(n):
        convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
        queued = client.post(
            f"/api/conversations/{convo}/messages", json={"text": f"hello {i}"}, headers={**headers, "Prefer": "respond-async"}
        )
        assert queued.status_code == 202
        runs.append(int(queued.get_json()["run"]))
    return runs


def statuses(app: Any, runs: list[int]) -> list[str]:
    with app.app_context():
        db.session.remove()
        found = dict(db.session.execute(sa.select(Run.id, Run.status).where(Run.id.in_(runs))).all())
        return [str(found[r]) for r in runs]


def in_redis(app: Any) -> tuple[int, int]:
    """(jobs waiting in the turn queue, jobs taken by a worker and not acknowledged)."""
    from app.copilot.turns import _jobs as jobs

    broker = app.extensions["turns"].broker
    taken = sum(broker.client.scard(key) for key in broker.client.scan_iter(match=f"{broker.namespace}:__acks__.*"))
    return broker.client.llen(f"{broker.namespace}:{jobs.QUEUE}"), taken


@contextmanager
def taking(app: Any, limit: int) -> Iterator[Any]:
    from app.copilot.turns import _jobs as jobs

    loop = jobs.passes(app, limit)
    loop.start()
    try:
        yield loop
    finally:
        if not loop.stopping:
            loop.stop(grace=0)


def test_a_worker_runs_at_most_its_limit_at_once_and_leaves_the_rest_in_redis(app, fake, gate):
    fake.enqueue(*(gated(fake, gate, f"Answer {i}.") for i in range(3)))
    runs = queue_turns(app, 3)
    with taking(app, limit=2) as loop:
        eventually(lambda: len(fake.requests) == 2, "two passes asking the model")
        assert loop.taken() == 2
        assert in_redis(app) == (1, 2)  # the third waits in Redis, free for another worker
        assert len(fake.requests) == 2
        gate.set()
        eventually(lambda: statuses(app, runs) == ["done"] * 3, "every turn done")
        eventually(lambda: in_redis(app) == (0, 0), "every job acknowledged")
    assert len(fake.requests) == 3


def test_a_stopping_worker_lets_its_running_pass_end_before_it_stops(app, fake, gate):
    fake.enqueue(gated(fake, gate, "Finished while stopping."))
    runs = queue_turns(app, 1)
    with taking(app, limit=4) as loop:
        eventually(lambda: len(fake.requests) == 1, "the pass asking the model")
        stopper = threading.Thread(target=loop.stop, kwargs={"grace": WAIT})
        stopper.start()
        eventually(lambda: loop.stopping, "the stop begun")
        assert stopper.is_alive()  # waiting for the pass
        gate.set()
        stopper.join(WAIT)
        assert not stopper.is_alive()
    assert statuses(app, runs) == ["done"]
    assert in_redis(app) == (0, 0)


def test_a_pass_cut_short_by_a_stop_is_given_back_to_the_queue_not_dropped(app, fake, gate):
    """Given back, another worker's claim decides: this one was claimed, so it runs nothing twice
    (the sweep ends it interrupted, with Retry); a job never claimed would simply run there."""
    fake.enqueue(gated(fake, gate, "Never said."))
    runs = queue_turns(app, 1)
    with taking(app, limit=4) as loop:
        eventually(lambda: len(fake.requests) == 1, "the pass asking the model")
        loop.stop(grace=0)
    assert in_redis(app) == (1, 0)
    assert statuses(app, runs) == ["running"]


def test_a_pass_over_the_turn_timeout_is_cancelled_and_its_job_acknowledged(app, fake, gate, caplog):
    app.config["TURN_TIMEOUT"] = 1
    fake.enqueue(gated(fake, gate, "Too late."))
    runs = queue_turns(app, 1)
    with taking(app, limit=4):
        # (The claim comes before the pass's first await, so the run is claimed however busy the
        # machine; the model may or may not have been asked by the time the second is up.)
        eventually(lambda: in_redis(app) == (0, 0), "the job acknowledged after the timeout")
        assert statuses(app, runs) == ["running"]  # (no longer said alive: the sweep ends it interrupted)
    assert any("ran over" in r.getMessage() for r in caplog.records)


def test_the_taker_outlives_a_dead_redis_and_takes_the_next_job_once_it_is_back(app, fake, tmp_path, caplog):
    """Redis gone, the taker says so and tries again each second (the jobs wait in Redis); back,
    the next job queued runs."""
    from app.copilot.turns import _jobs as jobs
    from app.copilot.turns._consume import PassLoop
    from tests.services import PrivateRedis

    private = PrivateRedis(tmp_path)
    loop = None
    try:
        app.config["REDIS_URL"] = private.url
        broker, actor, _ = jobs._dramatiq(app)  # the worker's broker, on a Redis of the test's own
        loop = PassLoop(app, broker, jobs.QUEUE, jobs._execute(app), limit=2, wake_ms=100, timeout=WAIT)
        loop.start()
        private.stop()
        eventually(lambda: any("could not take" in r.getMessage() for r in caplog.records), "the taker told of it")
        told = [r for r in caplog.records if "could not take" in r.getMessage()]
        # one line each time, no traceback: with Redis away it says so every second (a helper's try:
        # 17 tracebacks in a 16 s outage)
        assert all(r.levelname == "WARNING" and r.exc_info is None and "(Redis: " in r.getMessage() for r in told), told
        private.start()
        fake.enqueue(fake.reply_text("Back."))
        runs = queue_turns(app, 1)
        app.extensions["turns"].broker.flush(jobs.QUEUE)  # (queued on the app's Redis: sent here instead)
        actor.send(runs[0])
        eventually(lambda: statuses(app, runs) == ["done"], "the turn run once Redis was back")
    finally:
        if loop is not None:
            loop.stop(grace=0)
        private.stop()


def test_a_stopping_worker_with_redis_gone_still_stops_and_leaves_its_job_to_the_broker(app, fake, gate, tmp_path, caplog):
    """A pass cut short while Redis is down cannot be given back: the taker tries for a while,
    then says which jobs it leaves (Dramatiq's broker gives back a dead worker's jobs), and the
    worker stops rather than hang on Redis."""
    from app.copilot.turns import _jobs as jobs
    from app.copilot.turns._consume import PassLoop
    from tests.services import PrivateRedis

    private = PrivateRedis(tmp_path)
    try:
        app.config["REDIS_URL"] = private.url
        broker, actor, _ = jobs._dramatiq(app)
        loop = PassLoop(app, broker, jobs.QUEUE, jobs._execute(app), limit=2, wake_ms=100, timeout=WAIT)
        loop.start()
        fake.enqueue(gated(fake, gate, "Never said."))
        runs = queue_turns(app, 1)
        app.extensions["turns"].broker.flush(jobs.QUEUE)  # (queued on the app's Redis: sent here instead)
        actor.send(runs[0])
        eventually(lambda: len(fake.requests) == 1, "the pass asking the model")
        private.stop()
        stopper = threading.Thread(target=loop.stop, kwargs={"grace": 0})
        stopper.start()
        stopper.join(WAIT)
        assert not stopper.is_alive()
        assert any("unsettled" in r.getMessage() for r in caplog.records)
    finally:
        private.stop()


def test_a_pass_cancelled_while_its_write_runs_waits_for_the_write_before_it_lets_go(app):
    # A pass's write that a lock kept waiting, and each of its actions' calls, run in a thread
    # (turns._writes.in_thread) with the pass's own session. A pass cancelled meanwhile
    # (TURN_TIMEOUT, a stopping process) must not go on to let that session go (its `finally`) while
    # the thread still writes with it: it waits for the write, then is cancelled.
    import asyncio

    from app.copilot.turns._writes import in_thread

    release, writing, wrote = threading.Event(), threading.Event(), []

    def write() -> str:
        writing.set()
        release.wait(WAIT)
        wrote.append("committed")
        return "done"

    async def main() -> None:
        task = asyncio.create_task(in_thread(write))
        while not writing.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done()  # (cancelled, but its write still runs: it waits)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert wrote == ["committed"]  # the write finished before the task was let go

    with app.app_context():
        asyncio.run(main())


def test_a_passs_write_that_a_lock_keeps_waiting_is_written_in_a_thread_and_again_until_the_lock_goes(app):
    # On the loop a pass's write waits for a lock a moment at most; when that fails (SQLITE_BUSY,
    # nothing kept) it is written in a thread, where it waits as long as SQLite's busy timeout;
    # a lock held longer still (a migration's) fails that too, and the write is tried again there,
    # rather than the pass's end being lost (its reply with it).
    import asyncio

    from app.copilot.turns._writes import written
    from app.extensions import no_lock_wait

    tries: list[tuple[bool, str]] = []

    def end() -> str:
        tries.append((no_lock_wait.get(), threading.current_thread().name))
        if len(tries) < 3:
            raise sqlite_busy()
        return "written"

    with app.app_context():
        assert asyncio.run(written(end)) == "written"
    on_loop, *in_threads = tries
    assert on_loop == (True, "MainThread")  # tried on the loop first, waiting a moment at most
    assert len(in_threads) == 2 and all(not brief and name.startswith("countersign-pass-write") for brief, name in in_threads)


def test_a_passs_write_that_finds_no_pooled_connection_in_its_thread_is_written_again(app):
    # Requests waiting for a lock another process holds can hold every pooled connection past the
    # pool's timeout; the pass's write in its thread then fails to get one (sqlalchemy's
    # TimeoutError, nothing written). It is written again, not lost with the pass's reply (a
    # helper's 36 s SQLite lock: the pass ended `interrupted`).
    import asyncio

    import sqlalchemy.exc

    from app.copilot.turns._writes import written

    tries: list[str] = []

    def end() -> str:
        tries.append(threading.current_thread().name)
        if len(tries) == 1:  # (on the loop: the lock, so to a thread)
            raise sqlite_busy()
        if len(tries) == 2:
            raise sqlalchemy.exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached, connection timed out")
        return "written"

    with app.app_context():
        assert asyncio.run(written(end)) == "written"
    assert len(tries) == 3 and all(name.startswith("countersign-pass-write") for name in tries[1:])


def sqlite_busy() -> Exception:
    """What SQLAlchemy raises when SQLite's busy timeout ran out: SQLITE_BUSY, nothing written."""
    import sqlite3

    import sqlalchemy.exc

    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    return sqlalchemy.exc.OperationalError("UPDATE runs …", {}, busy)
