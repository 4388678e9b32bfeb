"""Redis stopped, then restarted empty, under a running app: web cards never depend on it. Rate
limits fall back to the process's memory while it is down, and go back to Redis once it answers.
(Chat threads waiting on Redis are tested in tests/test_connectors.py.)"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, User
from tests.helpers.turns import housekeeping, noted_runner
from tests.services import PrivateRedis, eventually


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def app_config(private_redis):
    return {"REDIS_URL": private_redis.url, "RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": private_redis.url}


def test_redis_stopped_then_restarted_empty_web_cards_still_work(app, alice, posts, handle_calls, private_redis):
    convo = alice.new_conversation()
    first = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert redis.Redis.from_url(private_redis.url).keys("LIMITS*"), "the limiter should count in this Redis"

    private_redis.stop()
    second = alice.card(alice.say(convo, f"/delete_post post={posts['Launch notes']}"))  # asked while it is down
    assert alice.answer(*second).status_code == 200

    private_redis.start()  # back, and empty
    assert alice.answer(*first).status_code == 200
    assert handle_calls["n"] == 2
    with app.app_context():
        assert set(db.session.scalars(sa.select(Approval.status))) == {"done"}

    # The limiter notices Redis is back (it retries with a growing back-off) and counts there again.
    # Its back-off doubles with each check made while Redis was down, up to 32 s (flask-limiter's
    # MAX_BACKEND_CHECKS): the slower the machine, the more checks, so wait past the longest.
    deadline = time.monotonic() + 60
    while not redis.Redis.from_url(private_redis.url).keys("LIMITS*"):
        assert time.monotonic() < deadline, "rate limits never went back to Redis"
        assert alice.htmx_post(f"/c/{convo}/messages", text="").status_code == 204
        time.sleep(0.5)


def test_a_message_kept_while_redis_is_down_is_answered_as_queued_and_its_turn_runs_once_it_is_back(
    app, alice, private_redis, monkeypatch, caplog
):
    # A helper's attack (2026-12-07): with Redis stopped, an API message was kept, its job could
    # not be queued, and the answer waiting for its turn (no `Prefer: respond-async`) was a 500 (a
    # client retrying it kept the message twice). The run then stayed queued after Redis was back,
    # and every later message of the conversation waited behind it. Now the answer is the 202 of a
    # turn still going, and the worker's housekeeping hands a run left queued to the runner again.
    from app.auth import create_token
    from app.copilot.turns import _sweep as sweep
    from app.models import Message, Run
    from tests.conftest import api_headers

    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(user, scope="client"))
    client = app.test_client()
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    submitted = noted_runner(app, monkeypatch)
    private_redis.stop()
    try:
        answered = client.post(f"/api/conversations/{convo}/messages", json={"text": "while away"}, headers=headers)
    finally:
        private_redis.start()
    assert answered.status_code == 202, answered.get_data(as_text=True)
    run_id = answered.get_json()["run"]
    told = [r for r in caplog.records if "could not queue the pass" in r.getMessage()]
    assert told and all(r.levelname == "WARNING" and r.exc_info is None for r in told), told  # (one line, no traceback)
    with app.app_context():
        said = db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo)).all()
        assert said == ["while away"]
        assert db.session.get(Run, run_id).status == "queued" and submitted == []  # (its job not sent)
        # Queued before Redis started again: whatever was queued then is gone, handed over at once.
        assert sweep.resubmit_stranded(60) == [run_id]
        assert sweep.resubmit_stranded(60) == []  # (once a period: the job just handed over may be on its way)
        assert submitted == [run_id]
    # A worker's housekeeping does it by itself (each TURN_HEARTBEAT, for runs queued TURN_DEAD_AFTER).
    redis.Redis.from_url(private_redis.url).delete(f"turn-resubmitted:{run_id}")
    monkeypatch.setitem(app.config, "TURN_HEARTBEAT", 1)
    with housekeeping(app):
        eventually(lambda: submitted == [run_id, run_id], "the worker's housekeeping queued it again")


def test_a_turn_queued_before_redis_came_back_empty_is_queued_again_at_once(app, alice, private_redis, monkeypatch):
    # Redis restarted empty takes the queued jobs with it: a message sent just before waited
    # TURN_DEAD_AFTER (a minute) for the housekeeping to queue its turn again. A run queued before
    # Redis started is queued again at the housekeeping's next look (each TURN_HEARTBEAT).
    from app.copilot.turns import _sweep as sweep
    from app.models import Run, utcnow

    submitted = noted_runner(app, monkeypatch)
    before = alice.new_conversation()
    assert alice.htmx_post(f"/c/{before}/messages", text="just before").status_code == 200
    assert len(submitted) == 1  # (its job queued in Redis, where no worker takes it)
    private_redis.stop()
    private_redis.start()  # (back, empty: the job is gone)
    with app.app_context():
        assert sweep.resubmit_stranded(60) == submitted[:1]  # (not a minute later)
        assert sweep.resubmit_stranded(60) == []  # (once a period: the job just queued may be on its way)
    # A message written since Redis started waits its minute as before: its job is there.
    client = redis.Redis.from_url(private_redis.url)
    eventually(lambda: int(client.info("server")["uptime_in_seconds"]) >= 2, "Redis up 2 s (its uptime is whole seconds)")
    after = alice.new_conversation()
    assert alice.htmx_post(f"/c/{after}/messages", text="just after").status_code == 200
    with app.app_context():
        assert sweep.resubmit_stranded(60) == []
        assert len(submitted) == 3
        # ... and once it has waited that long, it is queued again too (its job may have been lost).
        db.session.execute(sa.update(Run).where(Run.id == submitted[2]).values(queued_at=utcnow() - timedelta(seconds=120)))
        db.session.commit()
        assert sweep.resubmit_stranded(60) == [submitted[2]]


@pytest.mark.parametrize("route", ["/api/conversations/{}/events", "/c/{}/events"], ids=["api", "page"])
def test_an_event_stream_whose_redis_stops_ends_whole_and_says_so_once(app, alice, private_redis, caplog, route):
    # Redis stopped under open streams: each raised out of the response's body, which the WSGI
    # server logged as a traceback and cut mid-chunk, every reconnect (2 s) of every open page.
    # Now the stream ends as a stream does (its client reconnects after `retry`), one line logged.
    from app.auth import create_token
    from tests.conftest import api_headers

    convo = alice.new_conversation()
    if route.startswith("/api"):
        with app.app_context():
            user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
            client, headers = app.test_client(), api_headers(create_token(user, scope="client"))
    else:
        client, headers = alice.client, {}
    answer = client.get(route.format(convo), headers=headers, buffered=False)
    assert answer.status_code == 200
    body = iter(answer.response)
    assert next(body) == b"retry: 2000\n\n"
    private_redis.stop()
    with caplog.at_level("WARNING", logger="app.sse"):
        rest = list(body)  # (raised RedisError out of the body before)
    answer.close()
    assert all(part.startswith(b": keep-alive") for part in rest), rest
    ended = [r for r in caplog.records if "event stream ended: Redis did not answer" in r.getMessage()]
    assert len(ended) == 1 and ended[0].exc_info is None, caplog.records


def test_a_streamed_turn_following_redis_when_it_stops_ends_whole_and_says_so_once(app, alice, private_redis, caplog):
    # The ASGI server's stream of a turn whose pass runs elsewhere reads Redis (a thread's XREAD):
    # with Redis stopped the read's error left the stream for uvicorn to log as a traceback.
    import asyncio

    from app.api.turn_server import Handoff, TurnServer

    convo = alice.new_conversation()
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        await asyncio.Event().wait()  # (the client stays)
        return {"type": "http.disconnect"}

    async def follow() -> None:
        server = TurnServer(app)
        handoff = Handoff(convo, False, asyncio.get_running_loop())  # (its pass is not here: Redis is followed)
        handoff.run_id, handoff.after = 1, "0-0"
        handoff.render, handoff.live, handoff.let_go = (lambda event: None), (lambda: True), (lambda: None)
        try:
            await server._stream(handoff, receive, send)  # (raised the RedisError before)
        finally:
            server.readers.shutdown(wait=True)
            server.dispatchers.shutdown(wait=True)

    private_redis.stop()
    with caplog.at_level("WARNING", logger="app.api.turn_server"):
        asyncio.run(follow())
    assert [m.get("body") for m in sent] == [b"retry: 2000\n\n", b""]  # (and the stream's end)
    ended = [r for r in caplog.records if "stream ended: Redis did not answer" in r.getMessage()]
    assert len(ended) == 1 and ended[0].exc_info is None, caplog.records


def test_a_live_pass_is_not_taken_for_dead_while_redis_restarted_empty_has_not_had_its_heartbeat_yet(app, alice, private_redis):
    # Redis restarted empty takes every pass's "still here" with it until the pass's next beat
    # (TURN_HEARTBEAT). A page loaded meanwhile swept its conversation and ended a pass that was
    # still running `interrupted`: its reply was dropped when it ended. Now nothing is taken for
    # dead until a restarted Redis has been up as long as a "still here" lasts.
    from app.copilot import sweep_dead
    from app.copilot.turns._runs import alive_for, alive_key
    from app.extensions import redis_client
    from app.models import Conversation, Run, utcnow
    from app.status import RunStatus

    app.config["TURN_HEARTBEAT"] = 1  # (a "still here" lasts 4 s: the test waits that long, not 31 s)
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        convo = Conversation(tenant_id=user.tenant_id, user_id=user.id)
        db.session.add(convo)
        db.session.flush()
        run = Run(conversation_id=convo.id, status=RunStatus.RUNNING)
        db.session.add(run)
        db.session.commit()
        db.session.execute(sa.update(Run).where(Run.id == run.id).values(updated_at=utcnow() - timedelta(hours=1)))
        db.session.commit()
        run_id = run.id
        redis_client.client.set(alive_key(run_id), "1", ex=alive_for(1))  # (its pass, beating)
        private_redis.stop()
        private_redis.start()  # (back at once, empty: the beat is gone until the next)
        assert not redis_client.client.exists(alive_key(run_id))
        assert sweep_dead(60) == []
        assert db.session.scalar(sa.select(Run.status).where(Run.id == run_id)) == RunStatus.RUNNING
        # A pass that is really gone is still found: once Redis has been up that long, no beat came.
        eventually(lambda: [r.id for r in sweep_dead(60)] == [run_id], "the dead pass swept once Redis had been up 4 s")
        assert db.session.scalar(sa.select(Run.status).where(Run.id == run_id)) == RunStatus.INTERRUPTED


def test_a_worker_that_starts_looks_for_stranded_turns_at_once_not_a_heartbeat_later(app, alice, private_redis, monkeypatch):
    # A helper's try: with the worker stopped, a message sent, and Redis come back empty, the
    # worker started again waited its first TURN_HEARTBEAT (10 s) before its housekeeping's first
    # look: the turn began 12.0-12.4 s after Redis was back, 1.5 s after the worker was up.
    submitted = noted_runner(app, monkeypatch)
    convo = alice.new_conversation()
    assert alice.htmx_post(f"/c/{convo}/messages", text="while the worker was away").status_code == 200
    private_redis.stop()
    private_redis.start()  # (back, empty: its job is gone)
    monkeypatch.setitem(app.config, "TURN_HEARTBEAT", 3600)  # (a heartbeat later would be an hour)
    with housekeeping(app):
        eventually(lambda: submitted == submitted[:1] * 2, "the worker's first look queued it again")


def test_a_turn_queued_within_the_second_redis_restarted_in_is_queued_again_at_once(app, alice, private_redis, monkeypatch):
    # A helper's try: a message sent 0.1 s before Redis came back empty waited 64-68 s for its
    # turn, three times. Redis's uptime is the difference of two whole-second clocks, so it started
    # up to a second after "now - uptime": a job queued in that second was taken for one queued
    # since, at every look (each 10 s, the same fraction of a second each time).
    from app.copilot.turns import _sweep as sweep
    from app.models import Run, utcnow

    submitted = noted_runner(app, monkeypatch)
    convo = alice.new_conversation()
    assert alice.htmx_post(f"/c/{convo}/messages", text="just before").status_code == 200
    monkeypatch.setattr(sweep, "_uptime", lambda: 5)  # (Redis says: up 5 s)
    with app.app_context():
        queued = utcnow() - timedelta(seconds=4.5)  # (maybe before its start, maybe after: handed again)
        db.session.execute(sa.update(Run).where(Run.id == submitted[0]).values(queued_at=queued))
        db.session.commit()
        assert sweep.resubmit_stranded(60) == submitted[:1]
