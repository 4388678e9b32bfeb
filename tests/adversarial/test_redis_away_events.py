"""Redis away while a turn ends: what a page must learn — the turn's end, a card's change, a title
— is kept by the process that could not publish it and published once Redis answers (before that
process's next event, and at a worker's housekeeping). A helper's try (2026-12-07): Redis stopped
0.8 s into a reply; the pass ended and its messages were kept, but its end never reached the
stream, and every open page kept the half-written reply and its Stop button until a reload."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from app.copilot import events, kept_events
from app.status import EventType, RunStatus
from tests.helpers.turns import noted_runner
from tests.services import PrivateRedis, eventually


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def app_config(private_redis):
    # (Jobs go to the private Redis, where nothing takes them: each test runs its pass itself.)
    return {"REDIS_URL": private_redis.url, "TURNS_RUNNER": "dramatiq", "EVENTS_TEXT_EVERY_MS": 600_000}


def _alices_client(app: Any) -> tuple[Any, dict[str, str]]:
    """A test client and alice's API credential."""
    from app.auth import create_token
    from app.extensions import db
    from app.models import User
    from tests.conftest import api_headers

    with app.app_context():
        user = db.session.query(User).filter_by(email="alice@example.com").one()
        return app.test_client(), api_headers(create_token(user, scope="client"))


def _stream(app: Any, convo: int) -> list[events.Event]:
    with app.app_context():
        return events.read(convo, "0-0", None)


def test_what_a_page_must_learn_is_published_in_order_once_redis_answers_and_nothing_else(app, private_redis):
    convo = 4242  # (a stream is keyed by the id alone)
    private_redis.stop()
    with app.app_context():
        assert events.publish(convo, EventType.TURN, run=7, step=1, state="started") is None
        assert events.publish(convo, EventType.TEXT, run=7, step=1, text="half a rep") is None
        assert events.publish(convo, EventType.TURN, run=7, step=1, state="done", messages=[1]) is None
        assert events.publish(convo, EventType.APPROVAL, id="card-1", status="done") is None
    private_redis.start()
    with app.app_context():
        assert events.publish(convo, EventType.TITLE) is not None  # (the kept ones go first)
        assert not kept_events.waiting()
    got = [(e.type, e.data.get("state") or e.data.get("status")) for e in _stream(app, convo)]
    assert got == [("turn", "done"), ("approval", "done"), ("title", None)]  # (no start, no words)


def test_a_turn_that_ends_while_redis_is_away_reaches_a_reconnecting_client_once_redis_answers(app, private_redis):
    from tests.helpers.turns import status_of

    client, headers = _alices_client(app)
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    posted = client.post(
        f"/api/conversations/{convo}/messages", json={"text": "hello"}, headers={**headers, "Prefer": "respond-async"}
    )
    assert posted.status_code == 202
    seen = _stream(app, convo)[-1].id  # (where the client's Last-Event-ID stands)
    private_redis.stop()
    from app.copilot.turns import execute

    asyncio.run(execute(app, posted.get_json()["run"]))  # (the pass ends done; none of its events published)
    assert status_of(app, posted.get_json()["run"]) == "done"
    private_redis.start()  # (and nothing more is published or asked: the process's sender sends it)
    eventually(lambda: any(e.ends_turn() for e in _stream(app, convo)), "the kept end published")
    answer = client.get(f"/api/conversations/{convo}/events", headers={**headers, "Last-Event-ID": seen}, buffered=False)
    body = b""
    for part in answer.response:  # (a reconnect: what came after its last event)
        body += part
        if b'"state": "done"' in body:
            break
    answer.close()
    end = json.loads(body.split(b"event: turn\ndata: ")[-1].split(b"\n")[0])
    assert end["state"] == "done" and end["run"] == posted.get_json()["run"]
    assert [m["role"] for m in end["messages"]] == ["assistant"] and end["messages"][0]["text"]


def test_a_message_kept_while_redis_was_away_is_queued_before_the_next_one_this_process_sends(app, private_redis, monkeypatch):
    # The same try: a message sent while Redis was away waited for the workers' housekeeping
    # (TURN_DEAD_AFTER, about a minute), and one sent after Redis was back waited behind it.
    from app.copilot.turns import _kept

    monkeypatch.setattr(_kept, "TRY_EVERY_S", 3600.0)  # (here the next submit sends it, not the sender)
    client, headers = _alices_client(app)
    headers["Prefer"] = "respond-async"
    first, second = (client.post("/api/conversations", json={}, headers=headers).get_json()["id"] for _ in range(2))
    submitted = noted_runner(app, monkeypatch)
    private_redis.stop()
    try:
        away = client.post(f"/api/conversations/{first}/messages", json={"text": "while away"}, headers=headers)
    finally:
        private_redis.start()
    assert away.status_code == 202 and submitted == []
    back = client.post(f"/api/conversations/{second}/messages", json={"text": "once back"}, headers=headers)
    assert back.status_code == 202
    assert submitted == [away.get_json()["run"], back.get_json()["run"]]  # (the one kept first, in its order)
    again = client.post(f"/api/conversations/{second}/messages", json={"text": "and again"}, headers=headers)
    assert submitted[2:] == [again.get_json()["run"]]  # (sent once: no longer kept)


def test_what_a_web_process_kept_goes_out_by_itself_once_redis_answers_with_no_request_after(
    app, private_redis, monkeypatch, caplog
):
    # Helpers' tries: a Stop pressed during the outage (its end published by the web process)
    # stayed unshown for minutes after Redis was back, and a message sent during it waited for the
    # workers' housekeeping (TURN_DEAD_AFTER) whenever no later request reached the process that
    # kept it (two web processes; a page's reconnected stream stays open). The process's sender
    # sends both within about a second of Redis answering, with no request at all.
    from app.copilot.turns import _kept

    caplog.set_level("INFO", logger="app.copilot.turns._kept")
    client, headers = _alices_client(app)
    headers["Prefer"] = "respond-async"
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    submitted = noted_runner(app, monkeypatch)
    private_redis.stop()
    try:
        away = client.post(f"/api/conversations/{convo}/messages", json={"text": "while away"}, headers=headers)
        with app.app_context():
            events.publish(convo, EventType.TURN, run=99, step=1, state="stopped", messages=[])
            assert kept_events.waiting() and _kept.has_unsent()
    finally:
        private_redis.start()
    assert away.status_code == 202
    eventually(lambda: submitted == [away.get_json()["run"]], "the kept pass queued")
    last = lambda: [(e.type, e.data.get("state")) for e in _stream(app, convo)][-1:]  # noqa: E731
    eventually(lambda: last() == [("turn", "stopped")], "the kept end published")
    eventually(lambda: not app.extensions["kept_sending"], "the sender ended, nothing kept")
    said = [r.getMessage() for r in caplog.records if r.name == "app.copilot.turns._kept"]
    assert f"the pass of run {away.get_json()['run']}, kept while Redis was away, is queued" in said, said  # (its end, told)


def test_a_stop_asked_while_redis_is_away_is_a_plain_503_not_a_500(app, alice, private_redis, caplog):
    # The helper's third try: Stop on a running reply with Redis away was a 500 with a traceback,
    # and the page showed nothing. A running pass reads its stop from Redis, so none can be taken
    # then: the person is told so, the reply goes on, and Stop once Redis is back stops it.
    import sqlalchemy as sa

    from app.copilot.turns._runs import NOT_STOPPED, stop_key
    from app.extensions import db
    from app.models import Run

    client, headers = _alices_client(app)
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    posted = client.post(
        f"/api/conversations/{convo}/messages", json={"text": "hello"}, headers={**headers, "Prefer": "respond-async"}
    )
    run_id = posted.get_json()["run"]
    with app.app_context():  # (its pass is running: nothing takes jobs here)
        db.session.execute(sa.update(Run).where(Run.id == run_id).values(status=RunStatus.RUNNING))
        db.session.commit()
    private_redis.stop()
    try:
        api = client.post(f"/api/conversations/{convo}/stop", headers=headers)
        page = alice.htmx_post(f"/c/{convo}/stop")
    finally:
        private_redis.start()
    assert api.status_code == 503 and api.headers["Retry-After"] == "1", api.get_data(as_text=True)
    assert api.get_json()["message"] == NOT_STOPPED
    assert page.status_code == 503 and NOT_STOPPED in page.get_data(as_text=True)
    refused = [r.getMessage() for r in caplog.records if "Stop of run" in r.getMessage()]
    assert len(refused) == 2 and refused[0].startswith(f"a Stop of run {run_id} refused (503)"), refused  # (logged)
    with app.app_context():
        assert db.session.get(Run, run_id).status == RunStatus.RUNNING
    again = client.post(f"/api/conversations/{convo}/stop", headers=headers)  # (Redis back: taken)
    assert again.status_code in (200, 202), again.get_data(as_text=True)
    with app.app_context():
        from app.extensions import redis_client

        assert redis_client.client.exists(stop_key(run_id))


def _first_words(convo: int, run: int) -> Any:
    """A reply's words as its pass sends them (turns._Words, each at once), its first ones sent."""
    from app.copilot.turns._pass import _Words

    words = _Words(convo, run, 1, every=0.0, per_second=0.0)
    words.add("Here is ")
    return words


def test_words_redis_was_away_for_reach_a_page_with_the_next_ones_as_the_whole_text(app, private_redis):
    # A helper's try: a reply streaming when Redis stopped (and came back empty) lost on every open
    # page the words it had shown; after the return, only the words written since. The first
    # words after a gap now carry the whole text so far, and a page shows it all.
    from app.web.streams import LiveText

    convo, run = 4343, 11
    with app.app_context():
        words = _first_words(convo, run)
        private_redis.stop()
        words.add("what I ")  # (not published: Redis is away)
        private_redis.start()  # (empty: what was published before is gone too)
        words.add("can do.")
        live = LiveText(convo)  # (a page reconnecting now)
        shown = [live.add(e)[0] for e in events.read(convo, "0-0", None) if e.type == EventType.TEXT]
        assert shown == ["Here is what I can do."]
        words.add(" More.")  # (and after it, words as usual: the next ones only)
        more = [e for e in events.read(convo, "0-0", None) if e.type == EventType.TEXT]
        assert [e.data["text"] for e in more] == ["Here is what I can do.", " More."]
        assert [live.add(e)[0] for e in more[1:]] == ["Here is what I can do. More."]
        assert events.text_before(convo, run, 1, "9999999999999-0") == "Here is what I can do. More."


def test_words_redis_lost_between_two_sends_come_again_whole_with_the_next(app, private_redis):
    # Redis restarted empty between two of a reply's sends (no send failed, so no gap was seen):
    # the stream held only the words written since, and a page joining then showed the reply's
    # end without its beginning. The next words find the stream gone and carry the whole text.
    from app.web.streams import LiveText

    convo, run = 4344, 12
    with app.app_context():
        words = _first_words(convo, run)
        private_redis.stop()
        private_redis.start()  # (back at once, empty: nothing was sent meanwhile)
        words.add("what I can do.")
        texts = [e for e in events.read(convo, "0-0", None) if e.type == EventType.TEXT]
        assert [(e.data["text"], e.data.get("whole")) for e in texts] == [("Here is what I can do.", True)]
        assert [LiveText(convo).add(e)[0] for e in texts] == ["Here is what I can do."]
        words.add(" More.")  # (the stream is there again: the next words only)
        assert [e.data["text"] for e in events.read(convo, texts[0].id, None)] == [" More."]
        assert events.text_before(convo, run, 1, "9999999999999-0") == "Here is what I can do. More."
        # A page opened now follows the reply from those words: its start went with the rest.
        assert events.read(convo, events.replay_from(convo, None), None)[0].id == texts[0].id


def test_on_the_embedded_redis_too_words_lost_with_the_stream_come_again_whole(database_url):
    # The demo's in-process Redis runs the append's steps one by one (no Lua): the same check.
    from app import create_app
    from app.extensions import redis_client
    from tests.conftest import base_config

    app = create_app(base_config(database_url, REDIS_URL=None))
    with app.app_context():
        words = _first_words(4345, 13)
        redis_client.client.delete(events.key(4345))  # (its stream gone, as after a restart)
        words.add("what I can do.")
        texts = [(e.data["text"], e.data.get("whole")) for e in events.read(4345, "0-0", None)]
        assert texts == [("Here is what I can do.", True)]
