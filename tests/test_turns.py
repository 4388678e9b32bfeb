"""Turns are jobs (DESIGN §6.9, §6.10): a POST answers while the model thinks, the words stream
and resume from Last-Event-ID, Stop ends a turn truthfully, a conversation's turns run in order
and none is forgotten, Retry resumes a failed continuation once. The app runs its turns in the
in-process pool here (the real queue and worker: test_worker.py); the model streams and waits on
gates the tests open, so nothing depends on how fast this machine is."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, Message, Run, User
from tests.conftest import api_headers
from tests.helpers.prompts import prompt_of, shown_in_json
from tests.helpers.turns import api, new_conversation  # noqa: F401 (api: a fixture)

WAIT = 60  # seconds a test waits for something that must happen (a broken app, not a slow one)


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"TURNS_RUNNER": "pool"}


def say(api: Any, convo: int, text: str, prefer: str | None = None) -> Any:
    client, headers = api
    extra = {"Prefer": prefer} if prefer else {}
    return client.post(f"/api/conversations/{convo}/messages", json={"text": text}, headers={**headers, **extra})


class Events:
    """An open event stream, read one SSE event at a time."""

    def __init__(self, api: Any, url: str, last_event_id: str | None = None) -> None:
        client, headers = api
        extra = {"Last-Event-ID": last_event_id} if last_event_id else {}
        self.response = client.get(url, headers={**headers, **extra}, buffered=False)
        assert self.response.status_code == 200 and self.response.mimetype == "text/event-stream"
        self.chunks = iter(self.response.response)
        self.buffer = ""

    def next(self) -> tuple[str, str, dict[str, Any]]:
        """(id, name, data) of the next event; keep-alives and the retry line are passed over."""
        while "\n\n" not in self.buffer:
            self.buffer += next(self.chunks).decode()
        block, self.buffer = self.buffer.split("\n\n", 1)
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            if name in ("id", "event"):
                fields[name] = value
            elif name == "data":
                fields["data"] = fields.get("data", "") + value
        if "data" not in fields:
            return self.next()
        return fields["id"], fields.get("event", "message"), json.loads(fields["data"])

    def until(self, done: Any) -> list[tuple[str, str, dict[str, Any]]]:
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if done(event):
                return seen

    def close(self) -> None:
        self.response.close()


def ended(event: tuple[str, str, dict[str, Any]]) -> bool:
    return event[1] == "turn" and event[2]["state"] != "started"


def text_of(events: list[tuple[str, str, dict[str, Any]]]) -> str:
    return "".join(data["text"] for _, name, data in events if name == "text")


def run_status(app: Any, run_id: int) -> str:
    with app.app_context():
        return db.session.scalar(sa.select(Run.status).where(Run.id == run_id))


def elsewhere(app: Any, work: Any) -> None:
    """Do it as another request would, on a thread of its own (the test client resumes an open
    stream in this thread, under whatever context is current here)."""

    def run() -> None:
        with app.app_context():
            work()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(WAIT)


def settle(app: Any) -> None:
    assert app.extensions["turns"].wait_idle(WAIT), "turns still running"


# --- a POST answers while the model thinks; the words stream in parts ---------------------------


def test_respond_async_answers_while_the_model_thinks_and_the_words_stream_in_parts(app, api, streamed):
    gate = threading.Event()
    streamed.enqueue("Here are the posts you asked for", gate=gate)
    convo = new_conversation(api)
    posted = say(api, convo, "list my posts", prefer="respond-async")
    assert posted.status_code == 202 and posted.headers["Preference-Applied"] == "respond-async"
    stream = Events(api, posted.get_json()["events"])
    first = stream.until(lambda e: e[1] == "text")
    assert text_of(first) == "Here "  # the first word is out while the model still holds the rest
    assert run_status(app, posted.get_json()["run"]) == "running"
    gate.set()
    rest = stream.until(ended)
    stream.close()
    assert text_of(first + rest) == "Here are the posts you asked for"
    assert len([e for e in first + rest if e[1] == "text"]) >= 2
    end = rest[-1][2]
    assert end["state"] == "done"
    assert end["messages"] == [{"role": "assistant", "text": "Here are the posts you asked for"}]


def test_a_dropped_stream_resumes_from_last_event_id_with_no_gap_and_no_repeat(app, api, streamed):
    gate = threading.Event()
    streamed.enqueue("one two three four five", gate=gate)
    convo = new_conversation(api)
    posted = say(api, convo, "count", prefer="respond-async").get_json()
    stream = Events(api, posted["events"])
    before = stream.until(lambda e: e[1] == "text")
    stream.close()  # the connection drops after "one "
    gate.set()
    settle(app)  # the rest was written while nobody listened
    again = Events(api, f"/api/conversations/{convo}/events", last_event_id=before[-1][0])
    after = again.until(ended)
    again.close()
    assert text_of(before) == "one " and text_of(after) == "two three four five"
    ids = [e[0] for e in before + after]
    assert len(ids) == len(set(ids))


def test_a_page_cursor_replays_the_turn_still_running_from_its_start(app, api, streamed):
    """A reload mid-reply: the page read the stream's end before its messages; following from
    there starts at the running turn's start, so its words so far come again, once."""
    gate = threading.Event()
    streamed.enqueue("alpha beta gamma", gate=gate)
    convo = new_conversation(api)
    posted = say(api, convo, "greek", prefer="respond-async").get_json()
    Events(api, posted["events"]).until(lambda e: e[1] == "text")
    with app.app_context():
        from app.copilot import events

        cursor = events.last_id(convo)  # what a page rendered now has seen
    gate.set()
    replay = Events(api, f"/api/conversations/{convo}/events?after={cursor}")
    seen = replay.until(ended)
    replay.close()
    assert [e[2]["state"] for e in seen if e[1] == "turn"] == ["started", "done"]
    assert text_of(seen) == "alpha beta gamma"


def test_the_default_waits_for_the_turn_and_answers_with_its_messages(api, streamed):
    convo = new_conversation(api)
    answered = say(api, convo, "/list_posts")
    assert answered.status_code == 200
    assert [m["role"] for m in answered.get_json()["messages"]] == ["user", "assistant"]
    assert "Spring meetup" in answered.get_json()["messages"][1]["text"]


def test_prefer_wait_bounds_the_wait_then_answers_202_with_the_events(app, api, streamed):
    gate = threading.Event()
    streamed.enqueue("slow answer", gate=gate)
    convo = new_conversation(api)
    answered = say(api, convo, "take your time", prefer="wait=1")
    assert answered.status_code == 202  # the gate is shut: the turn cannot have ended
    body = answered.get_json()
    assert set(body) == {"run", "events"} and run_status(app, body["run"]) in ("queued", "running")
    gate.set()
    settle(app)
    assert run_status(app, body["run"]) == "done"


# --- Stop ----------------------------------------------------------------------------------------


def test_stop_ends_the_turn_at_its_next_step_and_says_what_ran(app, api, streamed):
    gate = threading.Event()
    streamed.enqueue("Let me look.", calls=[("list_posts", {})])
    streamed.enqueue("You have two posts and", gate=gate)
    convo = new_conversation(api)
    posted = say(api, convo, "what do I have?", prefer="respond-async").get_json()
    stream = Events(api, posted["events"])
    stream.until(lambda e: e[1] == "text" and e[2]["text"].startswith("\n\nYou"))
    client, headers = api
    stopping = client.post(f"/api/conversations/{convo}/stop", headers=headers)
    assert stopping.status_code == 200 and stopping.get_json() == {"run": posted["run"], "stopping": True}
    gate.set()
    end = stream.until(ended)[-1][2]
    stream.close()
    assert end["state"] == "stopped"
    said = [m["text"] for m in end["messages"]]
    assert said[0] == "Let me look.\n\nYou"  # what was shown, no more
    assert said[1].startswith("Stopped. Before it stopped: list_posts: Posts:")
    assert run_status(app, posted["run"]) == "stopped"
    # The model remembers what ran: the next turn's request carries list_posts's result.
    say(api, convo, "thanks")
    assert "Spring meetup" in json.dumps(json.loads(streamed.seen().splitlines()[-1]))


def test_stop_with_nothing_running_stops_nothing(api):
    convo = new_conversation(api)
    client, headers = api
    assert client.post(f"/api/conversations/{convo}/stop", headers=headers).get_json() == {"run": None, "stopping": False}


# --- one conversation, one history ---------------------------------------------------------------


def test_a_message_sent_while_a_turn_runs_waits_its_turn_and_both_are_remembered(app, api, streamed):
    gate = threading.Event()
    streamed.enqueue("first answer", gate=gate)
    streamed.enqueue("second answer")
    convo = new_conversation(api)
    first = say(api, convo, "first question", prefer="respond-async").get_json()
    assert streamed.started.wait(WAIT)  # the first turn's model is writing (and waits on the gate)
    second = say(api, convo, "second question", prefer="respond-async").get_json()
    assert run_status(app, first["run"]) == "running" and run_status(app, second["run"]) == "queued"
    gate.set()
    settle(app)
    assert run_status(app, second["run"]) == "done"
    last_request = json.dumps(streamed.requests[-1], default=str)
    assert streamed.seen().count("first question") >= 2  # the second turn's request held the first
    assert "first answer" in streamed.seen().splitlines()[-1] and "second question" in last_request


def test_a_message_while_a_card_waits_is_not_forgotten_when_the_card_resumes(app, api, posts, streamed):
    convo = new_conversation(api)
    asked = say(api, convo, f"/delete_post post={posts['Spring meetup']}").get_json()
    card = asked["pending"][0]
    streamed.enqueue("The card still waits for you.")
    say(api, convo, "remember the word pineapple")  # while the card waits
    client, headers = api
    streamed.enqueue("Deleted, as you confirmed.")
    confirmed = client.post(f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers=headers)
    assert confirmed.status_code == 200 and confirmed.get_json()["status"] == "done"
    streamed.enqueue("You said pineapple.")
    say(api, convo, "what word did I say?")
    last = streamed.seen().splitlines()[-1]
    assert "pineapple" in last and "Deleted, as you confirmed." in last  # nothing overwritten
    assert "Waiting for the person's answer on a card" in last  # the middle turn saw it waiting


# --- Retry ---------------------------------------------------------------------------------------


def test_retry_after_a_failed_continuation_resumes_once_and_never_asks_again(app, api, posts, streamed, handle_calls):
    convo = new_conversation(api)
    card = say(api, convo, f"/delete_post post={posts['Spring meetup']}").get_json()["pending"][0]
    streamed.enqueue("Deleted", fail=RuntimeError("the provider hung up"))
    client, headers = api
    confirmed = client.post(f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers=headers)
    assert confirmed.get_json()["status"] == "done" and handle_calls["n"] == 1
    assert confirmed.get_json()["messages"][-1]["role"] == "error"
    with app.app_context():
        run = db.session.scalar(sa.select(Run).where(Run.conversation_id == convo))
        assert run.status == "failed"  # not left running
    streamed.enqueue("Deleted it.")
    first, second = (
        client.post(f"/api/conversations/{convo}/retry", json={}, headers={**headers, "Prefer": p})
        for p in ("respond-async", "respond-async")
    )  # a double click
    assert first.status_code == 202 and second.status_code == 200 and second.get_json()["messages"] == []
    settle(app)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 1  # no second card
        assert db.session.scalar(sa.select(Run.status).where(Run.id == run.id)) == "done"
        texts = list(
            db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo, Message.role == "assistant"))
        )
    assert texts.count("Deleted it.") == 1 and handle_calls["n"] == 1
    assert "Done." in streamed.seen().splitlines()[-1]  # the model read the card's outcome again


# --- nothing waits on another conversation's model -----------------------------------------------


def test_a_thinking_model_delays_no_other_person_and_not_the_sign_in_page(app, api, sign_in, streamed):
    gate = threading.Event()
    streamed.enqueue("thinking", gate=gate)
    convo = new_conversation(api)
    alices = say(api, convo, "think hard", prefer="respond-async").get_json()
    assert streamed.started.wait(WAIT)
    bob = sign_in("bob@example.com")
    bob_convo = bob.new_conversation()
    reply = bob.client.post(
        f"/api/conversations/{bob_convo}/messages", json={"text": "/list_posts"}, headers={"X-CSRFToken": bob.csrf}
    )
    assert reply.status_code == 200 and reply.get_json()["messages"][-1]["role"] == "assistant"
    assert app.test_client().get("/login").status_code == 200
    assert run_status(app, alices["run"]) == "running"  # all of that while alice's model still thinks
    gate.set()
    settle(app)


# --- the browser's stream --------------------------------------------------------------------------


def test_the_browser_stream_sends_the_live_reply_as_fragments(app, alice, streamed):
    gate = threading.Event()
    streamed.enqueue("<b>not bold</b> words", gate=gate)
    convo = alice.new_conversation()
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    assert f'sse-connect="/c/{convo}/events?since=' in page
    response = alice.htmx_post(f"/c/{convo}/messages", text="hello")
    assert "hello" in response.get_data(as_text=True)
    stream = alice.client.get(f"/c/{convo}/events", buffered=False)
    chunks = iter(stream.response)
    body = ""
    while "&lt;b&gt;not" not in body:  # the first word, while the model holds the rest
        body += next(chunks).decode()
    assert 'id="text-' in body and "bold" not in body  # the rest of the reply is still held back
    gate.set()
    while 'class="message message--assistant" id="message-' not in body:  # the turn's end
        body += next(chunks).decode()
    stream.close()
    assert 'id="turn-' in body and 'hx-swap-oob="true"' in body
    assert "&lt;b&gt;not bold&lt;/b&gt;" in body and "<b>" not in body  # the model's words are text


def test_openapi_describes_prefer_the_events_and_stop(app):
    doc = app.test_client().get("/api/openapi.json").get_json()
    paths = doc["paths"]
    events = paths["/api/conversations/{id}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    assert {p["name"] for p in events["parameters"]} >= {"Last-Event-ID", "after"}
    assert "/api/conversations/{id}/stop" in paths
    for path in ("/api/conversations/{id}/messages", "/api/conversations/{id}/retry", "/api/approvals/{id}/confirm"):
        operation = paths[path]["post"]
        assert "Prefer" in {p["name"] for p in operation["parameters"]}
        assert operation["responses"]["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Queued"}


def test_a_confirm_with_respond_async_answers_the_outcome_before_the_continuation(app, api, posts, streamed, handle_calls):
    convo = new_conversation(api)
    asked = say(api, convo, f"/delete_post post={posts['Spring meetup']}").get_json()
    assert asked["pending"], asked
    card = asked["pending"][0]
    gate = threading.Event()
    streamed.enqueue("Deleted as you asked.", gate=gate)
    client, headers = api
    answered = client.post(
        f"/api/approvals/{card['id']}/confirm", json={"token": card["token"]}, headers={**headers, "Prefer": "respond-async"}
    )
    assert answered.status_code == 200 and handle_calls["n"] == 1
    body = answered.get_json()
    assert body["status"] == "done" and "Spring meetup" in body["result"]
    assert run_status(app, body["run"]) in ("queued", "running")  # the continuation has not ended
    gate.set()
    stream = Events(api, body["events"])
    end = stream.until(ended)[-1][2]
    stream.close()
    assert end["state"] == "done" and [m["text"] for m in end["messages"]] == ["Deleted as you asked."], end


# --- whose events ---------------------------------------------------------------------------------


def test_another_persons_events_are_not_found_on_either_route(app, api, sign_in, streamed):
    convo = new_conversation(api)
    say(api, convo, "/list_posts")
    bob = sign_in("bob@example.com")
    carol = sign_in("carol@example.com")  # another tenant
    for person in (bob, carol):
        assert person.client.get(f"/c/{convo}/events").status_code == 404
        assert person.client.get(f"/api/conversations/{convo}/events").status_code == 404
    assert app.test_client().get(f"/api/conversations/{convo}/events").status_code == 401
    for person in (bob, carol):
        assert person.client.post(f"/api/conversations/{convo}/stop", headers={"X-CSRFToken": person.csrf}).status_code == 404


def test_an_agent_token_reads_the_events_but_never_gets_a_card_token(app, posts, streamed):
    from app.auth import create_token

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        agent = (app.test_client(), api_headers(create_token(alice)))  # the default scope: agent
    convo = new_conversation(agent)
    posted = say(agent, convo, f"/delete_post post={posts['Spring meetup']}", prefer="respond-async").get_json()
    stream = Events(agent, posted["events"])
    end = stream.until(ended)[-1][2]
    stream.close()
    assert end["state"] == "paused" and end["pending"] and all(p["token"] is None for p in end["pending"])
    for shown in end["pending"]:  # the agent's view of each is the engine's: the words, no token
        shown_in_json(prompt_of(app, shown["id"], channel="api", agent=True), shown)


@pytest.mark.parametrize("cursor", ["99999999999999999999-0", "1-99999999999999999999", "x-1", "-1-0", "0-0"])
def test_any_cursor_is_a_stream_from_somewhere_never_an_error(app, api, cursor):
    app.config["EVENTS_HEARTBEAT"] = 1  # a quiet stream says so after a second: read past the first wait
    convo = new_conversation(api)
    say(api, convo, "/list_posts")
    for sent in ({"Last-Event-ID": cursor}, {}):
        url = f"/api/conversations/{convo}/events" + ("" if sent else f"?after={cursor}")
        stream = Events(api, url, last_event_id=sent.get("Last-Event-ID"))
        chunks = [next(stream.chunks).decode(), next(stream.chunks).decode()]  # the retry line, then Redis answered
        stream.close()
        assert chunks[0] == "retry: 2000\n\n" and (chunks[1].startswith("id: ") or chunks[1] == ": keep-alive\n\n")


# --- what a stream holds, and for how long -----------------------------------------------------------


def test_a_carriage_return_in_what_is_shown_cannot_frame_its_own_event(app):
    from app.sse import data_lines

    forged = "Harmless\rid: 99999999999999-0\rretry: 86400000\revent: turn\rdata: fake\r\rtail\r\nmore"
    lines = data_lines(forged)
    assert all(line.startswith("data: ") for line in lines.split("\n") if line)
    assert "\r" not in lines and "\n\n" not in lines  # no line of its own, no end of event


def test_one_person_holds_a_bounded_number_of_streams(app, api):
    app.config["EVENTS_MAX_STREAMS_PER_PERSON"] = 2
    convo = new_conversation(api)
    client, headers = api
    held = [client.get(f"/api/conversations/{convo}/events", headers=headers, buffered=False) for _ in range(2)]
    refused = client.get(f"/api/conversations/{convo}/events", headers=headers, buffered=False)
    assert [r.status_code for r in held] == [200, 200] and refused.status_code == 429
    assert "Too many live views" in refused.get_json()["message"]
    held.pop().close()  # a closed stream frees its place
    again = client.get(f"/api/conversations/{convo}/events", headers=headers, buffered=False)
    assert again.status_code == 200
    again.close()
    held.pop().close()


def test_an_open_stream_ends_when_its_token_is_revoked(app, api):
    from app.auth import find_token, revoke_token
    from app.copilot import events

    app.config["EVENTS_RECHECK"] = 0  # check before every event (the default: every 5 s)
    client, headers = api
    convo = new_conversation(api)
    stream = Events(api, f"/api/conversations/{convo}/events")

    def revoke() -> None:
        revoke_token(find_token(headers["Authorization"][7:]), by=None, channel="test")
        events.publish(convo, "text", run=1, step=1, text="after the revoke")

    elsewhere(app, revoke)
    assert "after the revoke" not in "".join(c.decode() for c in stream.chunks)  # it ended instead


def test_an_open_stream_ends_when_its_session_signs_out(app, alice):
    from app.auth import end_sessions
    from app.copilot import events

    app.config["EVENTS_RECHECK"] = 0
    convo = alice.new_conversation()
    stream = alice.client.get(f"/c/{convo}/events", buffered=False)

    def sign_out_everywhere() -> None:
        end_sessions(db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com")))
        events.publish(convo, "text", run=1, step=1, text="after the sign-out")

    elsewhere(app, sign_out_everywhere)
    assert "after the sign-out" not in "".join(c.decode() for c in stream.response)
    stream.close()


def read_until(response: Any, text: str) -> str:
    """A stream's body until `text` comes through, or until the stream ends."""
    read = ""
    for chunk in response:
        read += chunk.decode()
        if text in read:
            break
    return read


def test_a_browser_stream_ends_at_sign_out_whatever_bearer_token_rides_along(app, alice):
    """The browser's stream is let in by its session, so the session is what its recheck reads:
    a live token of anyone (here Bob's) in an Authorization header beside the cookie must not
    keep it open once Alice has signed out."""
    from app.auth import create_token, end_sessions
    from app.copilot import events

    app.config["EVENTS_RECHECK"] = 0
    with app.app_context():
        bobs = create_token(db.session.scalar(sa.select(User).where(User.email == "bob@example.com")), "bob's")
    convo = alice.new_conversation()
    stream = alice.client.get(f"/c/{convo}/events", headers={"Authorization": f"Bearer {bobs}"}, buffered=False)
    assert stream.status_code == 200

    def sign_out_everywhere() -> None:
        end_sessions(db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com")))
        events.publish(convo, "text", run=1, step=1, text="after the sign-out")

    elsewhere(app, sign_out_everywhere)
    assert "after the sign-out" not in read_until(stream.response, "after the sign-out")  # it ended instead
    stream.close()


def test_a_browser_stream_outlives_a_dead_bearer_token_beside_its_live_session(app, alice):
    """...and a revoked or made-up token beside a live session does not end it either."""
    from app.copilot import events

    app.config["EVENTS_RECHECK"] = 0
    convo = alice.new_conversation()
    stream = alice.client.get(f"/c/{convo}/events", headers={"Authorization": "Bearer made-up"}, buffered=False)
    elsewhere(app, lambda: events.publish(convo, "text", run=1, step=1, text="still here"))
    assert "still here" in read_until(stream.response, "still here")
    stream.close()


def test_an_open_stream_ends_when_its_session_grows_too_old(app, alice):
    """The session's age is taken at every recheck, not once when the stream opened: a stream
    that outlives its session's SESSION_MAX_AGE ends."""
    import time_machine

    from app.copilot import events
    from app.models import utcnow

    app.config["EVENTS_RECHECK"] = 0
    convo = alice.new_conversation()
    stream = alice.client.get(f"/c/{convo}/events", buffered=False)
    elsewhere(app, lambda: events.publish(convo, "text", run=1, step=1, text="after the session's age"))
    with time_machine.travel(utcnow() + timedelta(seconds=app.config["SESSION_MAX_AGE"] + 60), tick=False):
        read = read_until(stream.response, "after the session's age")
    assert "after the session's age" not in read  # it ended instead
    stream.close()


def test_no_connection_is_held_while_the_model_thinks(app, api, streamed):
    """A pass holds no pooled connection (no open transaction) across the model's await: many
    turns share one worker's pool and event loop."""
    from app.extensions import db as database

    gate = threading.Event()
    streamed.enqueue("thinking", gate=gate)
    convo = new_conversation(api)
    say(api, convo, "think", prefer="respond-async")
    assert streamed.started.wait(WAIT)
    with app.app_context():
        held = database.engine.pool.checkedout()
    gate.set()
    settle(app)
    assert held == 0


@pytest.mark.parametrize("embedded", [False, True], ids=["redis", "embedded"])
def test_once_a_stop_is_asked_for_no_words_are_appended(app, embedded):
    """The words' append and the stop's check are one step on Redis (a script): nothing lands in
    the stream after the stop key is set. The embedded fakeredis runs the same steps one by one."""
    from app.copilot import events
    from app.copilot.turns import _runs as runs
    from app.extensions import redis_client

    if embedded:
        app.config["REDIS_URL"] = None
        app.extensions["redis"] = None
    with app.app_context():
        first = events.publish(7001, "text", unless=runs.stop_key(55), run=55, step=1, text="India")
        redis_client.client.set(runs.stop_key(55), "1")
        with pytest.raises(events.Refused):
            events.publish(7001, "text", unless=runs.stop_key(55), run=55, step=1, text=" wins")
        assert events.publish(7001, "turn", run=55, step=1, state="stopped") is not None  # the end still goes out
        shown = [(e.type, e.data.get("text")) for e in events.read(7001, "0-0", None)]
        assert first is not None and shown == [("text", "India"), ("turn", None)]
        assert redis_client.client.ttl(events.key(7001)) > 0


def test_a_follower_joining_a_long_reply_starts_from_its_first_part_pages_back(app):
    """A turn whose start is hundreds of events back (a long reply) is still found and replayed
    from its start; one that ended is not replayed; past the limit the stream starts from now."""
    from app.copilot import events

    with app.app_context():
        events.publish(7002, "turn", run=1, step=1, state="started")
        events.publish(7002, "turn", run=1, step=1, state="done")
        started = events.publish(7002, "turn", run=2, step=1, state="started")
        for i in range(180):
            events.publish(7002, "text", run=2, step=1, text=f"w{i} ")
        now = events.last_id(7002)
        replayed = events.replay_from(7002, now)
        assert [e.id for e in events.read(7002, replayed, None)][0] == started  # from the turn's start
        events.publish(7002, "turn", run=2, step=1, state="done")
        assert events.replay_from(7002, events.last_id(7002)) == events.last_id(7002)  # ended: nothing to replay
        events.publish(7003, "turn", run=3, step=1, state="started")
        for _ in range(events.REPLAY_PAGE * events.REPLAY_PAGES):
            events.publish(7003, "text", run=3, step=1, text=".")
        assert events.replay_from(7003, events.last_id(7003)) == events.last_id(7003)  # too far back: from now


def test_words_held_back_by_a_stop_are_not_what_the_model_remembers_saying(app, api, streamed):
    """The stop lands before the reply's last words: they are not shown, and the model's history
    does not say them either (it remembers what the person saw)."""
    gate = threading.Event()
    streamed.enqueue("India unseenword", gate=gate)
    convo = new_conversation(api)
    posted = say(api, convo, "who won?", prefer="respond-async").get_json()
    stream = Events(api, posted["events"])
    stream.until(lambda e: e[1] == "text" and "India" in e[2]["text"])
    client, headers = api
    assert client.post(f"/api/conversations/{convo}/stop", headers=headers).get_json()["stopping"] is True
    gate.set()
    end = stream.until(ended)[-1][2]
    stream.close()
    assert end["state"] == "stopped" and [m["text"] for m in end["messages"]][0] == "India"
    say(api, convo, "thanks")
    assert "unseenword" not in streamed.seen().splitlines()[-1]


def test_a_cut_response_keeps_the_words_shown_and_its_calls_or_nothing():
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    from app.copilot.turns._endings import _as_shown

    call = ToolCallPart(tool_name="list_posts", args={}, tool_call_id="c1")
    cut = _as_shown(ModelResponse(parts=[TextPart("India wins"), call]), "India")
    assert [type(p).__name__ for p in cut[0].parts] == ["TextPart", "ToolCallPart"]
    assert cut[0].parts[0].content == "India" and cut[0].parts[1] is call
    assert _as_shown(ModelResponse(parts=[TextPart("never seen")]), "") == []  # no empty reply for the model


def test_a_replys_first_words_go_out_at_once_and_faster_ones_together(app):
    """Words the model sends within EVENTS_TEXT_EVERY_MS of the last that went out wait for the
    next (each event costs every open stream a wake-up); the first go out at once, and the end
    of the stream sends what is held."""
    from app.copilot import events
    from app.copilot.turns._pass import _Words

    async def speak() -> list[str | None]:
        words = _Words(7004, 61, 1, every=3600, per_second=100)  # nothing goes out by its timer here
        words.add("The ")
        sent = [e.data.get("text") for e in events.read(7004, "0-0", None)]
        words.add("answer ")
        words.add("is ")
        held = [e.data.get("text") for e in events.read(7004, "0-0", None)]
        words.flush()  # the stream's end
        return [*sent, "|", *held, "|", *(e.data.get("text") for e in events.read(7004, "0-0", None))]

    with app.app_context():
        seen = asyncio.run(speak())
    assert seen == ["The ", "|", "The ", "|", "The ", "answer is "]


def test_words_held_for_the_next_event_go_out_by_themselves_when_their_time_is_up(app):
    from app.copilot import events
    from app.copilot.turns._pass import _Words

    async def speak() -> list[str | None]:
        words = _Words(7005, 62, 1, every=0.05, per_second=100)
        words.add("first ")
        words.add("second")  # held: it came at once after the first
        for _ in range(600):  # the timer sends it (no flush is called); waits up to 60 s
            sent = [e.data.get("text") for e in events.read(7005, "0-0", None)]
            if len(sent) == 2:
                return sent
            await asyncio.sleep(0.1)
        return sent

    with app.app_context():
        assert asyncio.run(speak()) == ["first ", "second"]


def test_a_process_streaming_many_replies_sends_each_ones_words_less_often(app):
    """n replies streaming in one process share EVENTS_TEXT_PER_SECOND: each one's words wait
    n / per_second (here 2 / 0.001 s: held) where one reply alone would send them at once."""
    from app.copilot import events
    from app.copilot.turns._pass import _Words, streaming

    async def speak(conversation: int) -> int:
        words = _Words(conversation, 63, 1, every=0, per_second=0.001)
        words.add("one ")
        words.add("two ")
        words.add("three ")
        count = len(events.read(conversation, "0-0", None))
        words.flush()
        return count

    async def unshared(conversation: int) -> int:
        words = _Words(conversation, 64, 1, every=0, per_second=0)  # 0: not shared
        words.add("one ")
        words.add("two ")
        return len(events.read(conversation, "0-0", None))

    with app.app_context():
        alone = asyncio.run(speak(7006))
        with streaming(), streaming():
            busy = asyncio.run(speak(7007))
            off = asyncio.run(unshared(7008))
        assert [e.data["text"] for e in events.read(7007, "0-0", None)] == ["one ", "two three "]
    assert (alone, busy, off) == (3, 1, 2)


def test_words_held_when_the_model_breaks_never_follow_the_turns_end(app, api, streamed):
    """The provider breaks with a word held for the next event: the pass ends failed, and the
    held word's timer is gone with it (on the pool's loop, which lives on, a timer due before a
    later sleep's wake-up runs first). The window is 3 s, so "two" is held however slow the
    machine is between the model's two words."""
    from pydantic_ai.exceptions import ModelAPIError

    app.config["EVENTS_TEXT_EVERY_MS"] = 3000
    streamed.enqueue("one two three", fail=ModelAPIError("fake", "the provider broke"), fail_after=2)
    convo = new_conversation(api)
    posted = say(api, convo, "count", prefer="respond-async").get_json()
    settle(app)
    loop = app.extensions["turns"]._start()
    asyncio.run_coroutine_threadsafe(asyncio.sleep(4), loop).result(WAIT)  # (any timer due sooner ran)
    with app.app_context():
        from app.copilot import events

        seen = [(e.type, e.data.get("text") or e.data.get("state")) for e in events.read(convo, "0-0", None)]
    assert seen[-1] == ("turn", "failed") and seen.count(("turn", "failed")) == 1
    assert ("text", "one ") in seen and not any(kind == "text" and "two" in str(v) for kind, v in seen)
    assert run_status(app, posted["run"]) == "failed"


def test_a_turn_end_naming_another_conversations_message_shows_none_of_it(app, api):
    # An event outlives what it names (Redis keeps a conversation's stream for a day; a database
    # restored to before it can give a row id again): a turn's end is read only within its own
    # conversation, whatever ids it names.
    from app.copilot import conversations, events
    from app.models import Conversation
    from app.status import EventType, Role, RunStatus

    convo = new_conversation(api)
    with app.app_context():
        carol = db.session.scalar(sa.select(User).where(User.email == "carol@example.com"))
        theirs = Conversation(tenant_id=carol.tenant_id, user_id=carol.id, title="Globex plans")
        db.session.add(theirs)
        db.session.flush()
        secret = Message(conversation_id=theirs.id, role=Role.USER, text="globex only")
        ours = Message(conversation_id=convo, role=Role.USER, text="alice's own")
        db.session.add_all([secret, ours])
        db.session.commit()
        ids = [secret.id, ours.id]
        assert [m.text for m in conversations.messages(theirs.id, ids)] == ["globex only"]
        assert [m.text for m in conversations.messages(convo, ids)] == ["alice's own"]
        cursor = events.last_id(convo)
        events.publish(convo, EventType.TURN, run=1, step=1, state=RunStatus.DONE, messages=ids)
    stream = Events(api, f"/api/conversations/{convo}/events?after={cursor}")
    _, _, end = stream.next()
    stream.close()
    assert [m["text"] for m in end["messages"]] == ["alice's own"], end
