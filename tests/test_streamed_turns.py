"""A message answered with its own turn (`POST /api/conversations/<id>/messages` with `Accept:
text/event-stream`, app/api/streamed.py): under the WSGI app the pass is queued and the answer
follows Redis; in the ASGI process (`flask --app wsgi mcp`, `uvicorn asgi:app`) the pass runs in
that process and its events reach the answer in process (issue 25). Either way: the same checks
and errors as the JSON route, the message kept before the stream starts, the same events and ids
as `GET …/events` (so a reconnect resumes), and a person who goes away ends the stream, never the
turn. The ASGI process here is a real one, over real HTTP, on the tests' database and Redis, with
no turn worker beside it: a turn that ends there ran there."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from app.auth import create_token, revoke_token
from app.copilot.kit import text
from app.extensions import db
from app.models import ApiToken, Message, Post, Run, User
from app.status import Role
from tests.conftest import api_headers
from tests.helpers.mcp import McpServer, module_server
from tests.services import WAIT, eventually

SSE = {"Accept": "text/event-stream"}


class TurnServer(McpServer):
    """The ASGI process with the offline model's words a little apart (a turn lasts a second or
    two, so a test can act while it runs), its queued passes in its own pool (no worker runs in
    these tests), and its streams' credentials checked every second."""

    def __init__(self, database_url: str, **extra: str) -> None:
        self.extra = {"OFFLINE_WORD_PAUSE_MS": "60", "TURNS_RUNNER": "pool", "EVENTS_RECHECK": "1", **extra}
        super().__init__(database_url)

    def start(self) -> None:
        self.env.update(self.extra)
        super().start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class NoRoom(TurnServer):
    """An ASGI process with no room for a pass of its own (WORKER_THREADS=0)."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, WORKER_THREADS="0")


class QueueOnly(TurnServer):
    """An ASGI process whose queued passes wait for a worker that never comes (none runs here),
    and whose JSON answers wait up to 20 s for their turn."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, TURNS_RUNNER="dramatiq", TURN_WAIT="20")


class OneMessageAnHour(TurnServer):
    """An ASGI process whose rate limits are on: one message an hour per person."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, RATELIMIT_ENABLED="1", RATELIMIT_MESSAGES_PER_PERSON="1 per hour")


mcp_process, server = module_server(TurnServer)
full_process, full = module_server(NoRoom, "full")
queue_only_process, queue_only = module_server(QueueOnly, "queue_only")
limited_process, limited = module_server(OneMessageAnHour, "limited")


def token(app: Any, email: str = "alice@example.com", scope: str = "client") -> str:
    with app.app_context():
        person = db.session.scalar(sa.select(User).where(User.email == email))
        return create_token(person, scope=scope)


def conversation(app: Any, bearer: str) -> int:
    made = app.test_client().post("/api/conversations", json={}, headers=api_headers(bearer))
    assert made.status_code == 201
    return int(made.get_json()["id"])


def events_of(lines: Any, until_end: bool = True) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, name, data) of each event read from an SSE body's lines, up to a turn's end."""
    seen = []
    for event in each_event(lines):
        seen.append(event)
        if until_end and ended(event):
            break
    return seen


def each_event(lines: Any) -> Any:
    """(id, name, data) of each event of an SSE body's lines, as each is read."""
    fields: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(": ")
            fields[name] = fields.get(name, "") + value if name == "data" else value
            continue
        if "data" in fields:
            yield fields.get("id", ""), fields.get("event", ""), json.loads(fields["data"])
        fields = {}


def ended(event: tuple[str, str, dict[str, Any]]) -> bool:
    return event[1] == "turn" and event[2]["state"] != "started"


def streamed_post(base: str, convo: int, bearer: str, text: str, **headers: str) -> Any:
    return httpx2.stream(
        "POST",
        f"{base}/api/conversations/{convo}/messages",
        json={"text": text},
        headers={**api_headers(bearer), **SSE, **headers},  # (Accept=… in headers asks otherwise)
        timeout=WAIT,
    )


def posted(base: str, convo: int, text: str, headers: dict[str, str]) -> Any:
    """A message POSTed whole (the answer read at once)."""
    return httpx2.post(f"{base}/api/conversations/{convo}/messages", json={"text": text}, headers=headers, timeout=WAIT)


def replies(app: Any, convo: int) -> list[str]:
    with app.app_context():
        return list(
            db.session.scalars(
                sa.select(Message.text).where(Message.conversation_id == convo, Message.role == "assistant").order_by(Message.id)
            )
        )


# --- the ASGI process runs the turn itself ---------------------------------------------------------


def test_the_asgi_process_runs_a_streamed_turn_itself_and_answers_with_its_events(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, "hello") as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        seen = events_of(lines)
        rest = list(lines)  # the stream closes after the turn's end
    names = [(name, data.get("state")) for _, name, data in seen]
    assert names[0] == ("title", None) and ("turn", "started") in names and names[-1] == ("turn", "done")
    assert any(name == "text" for name, _ in names)
    end = seen[-1][2]
    assert [m["role"] for m in end["messages"]] == ["assistant"] and end["pending"] == []
    assert replies(app, convo) == [end["messages"][0]["text"]]  # kept by the pass, no worker running
    assert not any(line.startswith("data:") for line in rest)


def test_a_streamed_turns_events_are_the_conversations_own_and_a_reconnect_resumes_after_them(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, "hello") as response:
        seen = events_of(response.iter_lines())
    started = next(i for i, (_, name, data) in enumerate(seen) if name == "turn" and data["state"] == "started")
    client = app.test_client()
    again = client.get(
        f"/api/conversations/{convo}/events",
        headers={**api_headers(bearer), "Last-Event-ID": seen[started][0]},
        buffered=False,
    )
    chunks = iter(again.response)
    resumed = events_of(line for chunk in chunks for line in chunk.decode().split("\n"))
    again.close()
    assert [(i, name) for i, name, _ in resumed] == [(i, name) for i, name, _ in seen[started + 1 :]]


def test_a_destructive_call_streamed_ends_paused_on_its_card_and_nothing_runs(app, server, posts):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, f"/delete_post post={posts['Spring meetup']}") as response:
        seen = events_of(response.iter_lines())
    end = seen[-1][2]
    assert end["state"] == "paused" and [p["type"] for p in end["pending"]] == ["confirm"]
    assert end["pending"][0]["reason"].startswith("Delete")
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is not None  # (handle() would have deleted it)


def test_the_person_going_away_ends_the_stream_never_the_turn(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, "hello") as response:
        for line in response.iter_lines():
            if line.startswith("event: text"):
                break  # the words have begun: leave
    eventually(lambda: replies(app, convo), "the turn's reply, kept although nobody read it")
    with app.app_context():
        assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == "done"


def test_a_revoked_token_ends_its_streamed_turns_answer_and_the_turn_goes_on(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, "hello") as response:
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("event: turn"):
                break
        with app.app_context():
            newest = db.session.scalar(sa.select(ApiToken).order_by(ApiToken.id.desc()).limit(1))
            assert revoke_token(newest, by=None, channel="cli")
        left = events_of(lines)
    assert not any(ended(event) for event in left)  # cut at its next check, before the turn's end
    eventually(lambda: replies(app, convo), "the turn's reply, kept")


def test_a_second_message_while_a_turn_runs_waits_its_turn_and_both_answers_stream(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    first: list[Any] = []  # the second message's stream: the first turn's end, then its own
    with streamed_post(server.base, convo, bearer, "hello") as response:
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("event: text"):
                break

        def second() -> None:  # (its pass waits for the first's: it follows Redis meanwhile)
            with streamed_post(server.base, convo, bearer, "/list_posts") as other:
                first.extend(events_of(other.iter_lines(), until_end=False))  # (to its own run's end)

        waiting = threading.Thread(target=second)
        waiting.start()
        mine = events_of(lines)
        waiting.join(WAIT)
    ends = [(data["run"], data["state"]) for _, name, data in first if name == "turn" and data["state"] != "started"]
    assert mine[-1][2]["state"] == "done" and ends == [(mine[-1][2]["run"], "done"), (ends[-1][0], "done")]
    assert ends[-1][0] != mine[-1][2]["run"] and len(replies(app, convo)) == 2


def test_with_no_room_for_a_pass_the_turn_is_queued_and_its_answer_follows_redis(app, full):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(full.base, convo, bearer, "hello") as response:
        seen = events_of(response.iter_lines())
    assert seen[-1][2]["state"] == "done" and replies(app, convo) == [seen[-1][2]["messages"][0]["text"]]


# --- the same doors as the JSON route --------------------------------------------------------------


@pytest.mark.parametrize("who", ["nobody", "bob", "carol"])
def test_a_streamed_message_to_a_conversation_not_ones_own_is_refused_and_nothing_is_kept(app, server, who):
    bearer = token(app)
    convo = conversation(app, bearer)
    headers = {} if who == "nobody" else api_headers(token(app, f"{who}@example.com"))
    response = posted(server.base, convo, "hi", {**SSE, **headers})
    assert response.status_code == (401 if who == "nobody" else 404)
    assert response.headers["content-type"].startswith("application/json")
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.conversation_id == convo)) == 0


@pytest.mark.parametrize("with_csrf", [True, False])
def test_a_browser_session_streams_its_turn_only_with_its_csrf_header(app, server, alice, with_csrf):
    convo = alice.new_conversation()
    cookie = alice.client.get_cookie("session")
    headers = {**SSE, "Cookie": f"session={cookie.value}", **({"X-CSRFToken": alice.csrf} if with_csrf else {})}
    with httpx2.stream(
        "POST", f"{server.base}/api/conversations/{convo}/messages", json={"text": "hello"}, headers=headers, timeout=WAIT
    ) as response:
        seen = events_of(response.iter_lines()) if response.status_code == 200 else []
        status = response.status_code
    if with_csrf:
        assert status == 200 and seen[-1][2]["state"] == "done"
    else:
        assert status == 400 and seen == []
        with app.app_context():
            assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.conversation_id == convo)) == 0


@pytest.mark.parametrize("order", ["signed in first", "nobody first"])
def test_one_requests_person_never_carries_over_to_the_next_on_the_asgi_process(app, server, alice, order):
    # The ASGI process runs each request through the Flask app on its one loop: who was signed in
    # for one request (Flask-Login keeps it in `g`) must not be the next one's.
    convo = alice.new_conversation()
    signed = {**SSE, "Cookie": f"session={alice.client.get_cookie('session').value}", "X-CSRFToken": alice.csrf}
    url = f"{server.base}/api/conversations/{convo}/messages"
    asks = [signed, SSE] if order == "signed in first" else [SSE, signed]
    statuses = []
    for headers in asks:
        with httpx2.stream("POST", url, json={"text": "hello"}, headers=headers, timeout=WAIT) as response:
            statuses.append(response.status_code)
            events_of(response.iter_lines())
    assert statuses == ([200, 401] if order == "signed in first" else [401, 200])


def test_the_asgi_process_answers_any_other_path_as_mcp_does(app, server):
    # (docs/using.md) Only the streamed POST and /mcp are its own: anything else is MCP's answer,
    # 401 JSON without a bearer token, a plain 404 with one (never a page of the web's).
    bare = httpx2.get(f"{server.base}/login", timeout=WAIT)
    assert bare.status_code == 401 and bare.json()["error"] == "unauthorized"
    signed = httpx2.get(f"{server.base}/login", headers=api_headers(token(app)), timeout=WAIT)
    assert signed.status_code == 404 and "text/plain" in signed.headers["content-type"]


def test_an_empty_streamed_message_is_a_json_400(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    response = posted(server.base, convo, " ", {**SSE, **api_headers(bearer)})
    assert response.status_code == 400 and response.json()["error"]


def test_a_message_not_asked_as_a_stream_gets_the_json_answer_from_the_asgi_process_too(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)
    response = posted(server.base, convo, "hello", {**api_headers(bearer), "Prefer": "respond-async"})
    assert response.status_code == 202 and set(response.json()) == {"run", "events"}


# --- the WSGI app: the pass is queued, the answer follows Redis ------------------------------------


def test_under_wsgi_a_streamed_message_is_answered_with_its_turn_from_redis(app, model):
    model.enqueue(text("Nothing to do here."))
    bearer = token(app)
    convo = conversation(app, bearer)
    response = app.test_client().post(
        f"/api/conversations/{convo}/messages", json={"text": "hi"}, headers={**api_headers(bearer), **SSE}, buffered=False
    )
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    seen = events_of(line for chunk in response.response for line in chunk.decode().split("\n"))
    response.close()
    assert seen[-1][2]["state"] == "done" and seen[-1][2]["messages"][0]["text"] == "Nothing to do here."


def test_accept_anything_still_gets_the_json_answer(app, model):
    model.enqueue(text("Hi."))
    bearer = token(app)
    convo = conversation(app, bearer)
    response = app.test_client().post(
        f"/api/conversations/{convo}/messages", json={"text": "hi"}, headers={**api_headers(bearer), "Accept": "*/*"}
    )
    assert response.status_code == 200 and response.get_json()["messages"][-1]["text"] == "Hi."


def test_openapi_says_a_message_may_be_answered_with_its_turns_events(app):
    operation = app.test_client().get("/api/openapi.json").get_json()["paths"]["/api/conversations/{id}/messages"]["post"]
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "Accept: text/event-stream" in operation["description"]


# --- what a helper found attacking it (2026-12-06) -------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "stream"),
    [
        ("text/event-stream", True),
        ("TEXT/EVENT-STREAM", True),
        ("text/*", True),
        ("text/event-stream; charset=utf-8", True),
        ("text/event-stream;q=0.9, application/json;q=0.5", True),
        ("application/json, text/event-stream", False),  # (what MCP clients send: JSON first)
        ("text/event-stream;q=0, application/json", False),
        ("*/*", False),
        ("", False),
        (None, False),
    ],
)
def test_which_accept_asks_for_the_turn_as_a_stream(accept, stream):
    from app.api.streamed import wants_stream

    assert wants_stream(accept) is stream


def test_a_json_answer_never_waits_for_its_turn_on_the_asgi_processs_loop(app, queue_only):
    # A message whose Accept prefers JSON is waited for (up to TURN_WAIT) as the plain route does.
    # Run on the loop, that wait stopped every stream and pass of the process; it goes to a thread.
    bearer, other = token(app), token(app, "bob@example.com")
    # Ids start again with each test's fresh tables: the first few are left to the earlier tests'
    # conversations, whose passes in the module's other process may still be ending (and a pass
    # that ends queues the next run of its conversation id, which would then be this one).
    for _ in range(5):
        conversation(app, other)
    convo, theirs = conversation(app, bearer), conversation(app, other)
    waited: list[Any] = []

    def json_message() -> None:
        headers = {**api_headers(bearer), "Accept": "application/json, text/event-stream"}
        url = f"{queue_only.base}/api/conversations/{convo}/messages"
        waited.append(httpx2.post(url, json={"text": "hello"}, headers=headers, timeout=WAIT))

    waiting = threading.Thread(target=json_message)
    waiting.start()
    eventually(lambda: replies_or_runs(app, convo), "the JSON message's run, queued")
    with streamed_post(queue_only.base, theirs, other, "hello") as response:
        seen = events_of(response.iter_lines())
    assert seen[-1][2]["state"] == "done"
    assert waiting.is_alive()  # Bob's whole turn ran while Alice's answer still waited for hers
    waiting.join(WAIT)
    assert waited[0].status_code == 202, waited[0].text
    assert waited[0].headers["content-type"].startswith("application/json")


def replies_or_runs(app: Any, convo: int) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count(Run.id)).where(Run.conversation_id == convo)) or 0


@pytest.mark.parametrize("accept", ["TEXT/EVENT-STREAM", "text/*"])
def test_a_stream_asked_in_other_words_streams_as_the_words_come(app, server, accept):
    bearer = token(app)
    convo = conversation(app, bearer)
    with streamed_post(server.base, convo, bearer, "hello", Accept=accept) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("event: text"):
                break  # the first words, while the reply is still being written: not buffered to its end
        with app.app_context():
            assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == "running"
        assert events_of(lines)[-1][2]["state"] == "done"


def test_a_chunked_message_body_is_read_on_the_asgi_process(app, server):
    bearer = token(app)
    convo = conversation(app, bearer)

    def body():
        yield b'{"text": '
        yield b'"hello"}'

    headers = {**api_headers(bearer), **SSE, "Content-Type": "application/json"}
    url = f"{server.base}/api/conversations/{convo}/messages"
    with httpx2.stream("POST", url, content=body(), headers=headers, timeout=WAIT) as response:
        assert response.status_code == 200
        assert events_of(response.iter_lines())[-1][2]["state"] == "done"


def test_with_every_stream_place_taken_a_streamed_message_is_refused_before_it_is_kept(app, server):
    from app import sse

    bearer = token(app)
    convo = conversation(app, bearer)
    with app.test_request_context():
        alice = db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com"))
        for _ in range(app.config["EVENTS_MAX_STREAMS_PER_PERSON"]):
            sse.hold(alice, convo)  # (as her open tabs would)
    for base, post in ((server.base, httpx2.post), (None, None)):
        if base is None:  # the WSGI app, in process
            answer = app.test_client().post(
                f"/api/conversations/{convo}/messages", json={"text": "hi"}, headers={**api_headers(bearer), **SSE}
            )
            status, kind = answer.status_code, answer.mimetype
        else:
            answer = post(
                f"{base}/api/conversations/{convo}/messages", json={"text": "hi"}, headers={**api_headers(bearer), **SSE}
            )
            status, kind = answer.status_code, answer.headers["content-type"]
        assert status == 429 and "json" in kind
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.conversation_id == convo)) == 0
        assert db.session.scalar(sa.select(sa.func.count(Run.id)).where(Run.conversation_id == convo)) == 0


def test_a_message_waiting_on_a_locked_database_holds_up_no_other_request_of_the_asgi_process(app, server):
    # Another process holds the conversation's write lock (SQLite: the database's; PostgreSQL: the
    # row's). A streamed message waits for it as under gunicorn, in a thread: the process's loop
    # goes on serving everyone else (run on the loop, the view froze them all until the lock went).
    # Its request is tried on the loop first, finds the lock held without waiting for it
    # (PostgreSQL's NOWAIT; SQLite's busy timeout there is 10 ms), is undone, and waits in a
    # thread: one message kept, one turn, as anywhere.
    convo, answered = message_while_locked(app, server, token(app))
    assert answered and answered[0][1][-1][2]["state"] == "done"
    with app.app_context():
        said = db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo, Message.role == Role.USER))
        assert list(said) == ["hello"]
        assert db.session.scalar(sa.select(sa.func.count(Run.id)).where(Run.conversation_id == convo)) == 1


def test_a_pass_ending_on_a_locked_database_holds_up_no_other_request_of_the_asgi_process(app, server):
    # A streamed turn's pass runs on the ASGI process's loop. Its end is written while another
    # process holds the lock that end needs (SQLite: the database's; PostgreSQL: the run's row),
    # and 20 more messages to the same process wait for it meanwhile, each in a request thread
    # holding a pooled connection. Written on the loop, the end froze every request of the process
    # until the lock went (issue 25: probes answered 28.5 s late). Then 7 streamed messages
    # arrive, each tried on the loop first: with every pooled connection held by a waiting thread,
    # a loop that waited for one froze the process too (the reverted 571a71d: a helper's probes
    # waited until the lock went). Now the loop answers while they wait, and once the lock goes
    # the end is written: the reply kept, no message lost, each kept once.
    bearer = token(app)
    with streamed_post(server.base, conversation(app, bearer), bearer, "hello") as response:
        reply = "".join(data["text"] for _, name, data in events_of(response.iter_lines()) if name == "text").strip()
    convo, others = conversation(app, bearer), [conversation(app, bearer) for _ in range(20)]
    streamed_others = [conversation(app, bearer) for _ in range(7)]  # (with the turn's own: alice's 8 stream places)
    seen: list[Any] = []

    def stream() -> None:
        with streamed_post(server.base, convo, bearer, "hello") as response:
            for event in each_event(response.iter_lines()):
                seen.append(event)
                if ended(event):
                    return

    def shown() -> str:
        return "".join(data["text"] for _, name, data in list(seen) if name == "text").strip()

    answers: list[Any] = []

    def message(other: int) -> None:
        answer = posted(server.base, other, "hi", api_headers(bearer))
        answers.append((answer.status_code, answer.text))

    streamed_ends: list[Any] = []

    def streamed_message(other: int) -> None:
        with streamed_post(server.base, other, bearer, "hi") as response:
            streamed_ends.append((response.status_code, events_of(response.iter_lines())[-1:]))

    streaming = threading.Thread(target=stream)
    streaming.start()
    eventually(lambda: any(name == "turn" for _, name, _ in list(seen)), "the turn's start")
    with app.app_context():
        lock = db.engine.connect()
    burst = [threading.Thread(target=message, args=(other,)) for other in others]
    burst += [threading.Thread(target=streamed_message, args=(other,)) for other in streamed_others]
    try:
        if lock.dialect.name == "sqlite":
            lock.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            lock.execute(sa.select(Run.id).where(Run.conversation_id == convo).with_for_update())
        assert not any(ended(event) for event in list(seen)), "the turn ended before the lock was taken"
        for thread in burst:
            thread.start()
        # (the streamed messages are tried on the loop as they arrive, within the turn's last words)
        eventually(lambda: shown() == reply, "the turn's last words (its pass goes on to its end)")
        for _ in range(3):  # (the end is under way, waiting for the lock)
            asked = time.monotonic()
            probe = httpx2.get(f"{server.base}/mcp", timeout=WAIT)  # (no token: 401 at once, on the loop)
            assert probe.status_code == 401
            # answered while the end waits, not after (SQLite's busy timeout is 30 s; PostgreSQL waits on)
            assert time.monotonic() - asked < 15
            time.sleep(0.5)
        assert not any(ended(event) for event in list(seen))  # (the end still waits for the lock)
    finally:
        lock.rollback()
        lock.close()
    streaming.join(WAIT)
    for thread in burst:
        thread.join(WAIT)
    assert seen and seen[-1][1] == "turn" and seen[-1][2]["state"] == "done"
    assert replies(app, convo) == [reply]
    assert len(answers) == 20 and {status for status, _ in answers} <= {200, 202}, answers  # (each kept)
    assert len(streamed_ends) == 7, streamed_ends
    assert all(status == 200 and end and end[0][2]["state"] == "done" for status, end in streamed_ends), streamed_ends
    with app.app_context():
        kept = sa.select(sa.func.count(Message.id)).where(Message.conversation_id.in_(others), Message.role == Role.USER)
        assert db.session.scalar(kept) == 20
        said = sa.select(Message.conversation_id).where(Message.conversation_id.in_(streamed_others), Message.role == Role.USER)
        assert sorted(db.session.scalars(said)) == sorted(streamed_others)  # (each once)


def test_a_message_tried_on_the_loop_then_run_in_a_thread_counts_once_against_its_rate_limit(app, limited):
    # One message an hour per person. Counted twice (its try on the loop, then its run in a
    # thread), the message that waited for the lock would have been refused (429).
    bearer = token(app)
    convo, answered = message_while_locked(app, limited, bearer)
    assert answered and answered[0][1][-1][2]["state"] == "done"
    # Its answer tells the count, as one served on the loop does (Flask-Limiter's headers, for the
    # first of its limits: the address's): the try on the loop counted it, once, and the run in a
    # thread, which counts nothing, carries the headers that try was answered with.
    headers = answered[0][0]
    assert int(headers["X-RateLimit-Remaining"]) == int(headers["X-RateLimit-Limit"]) - 1
    assert int(headers["X-RateLimit-Reset"]) > 0
    with streamed_post(limited.base, convo, bearer, "again") as response:
        assert response.status_code == 429  # (the hour's one message was that one)


def message_while_locked(app: Any, server: Any, bearer: str) -> tuple[int, list[Any]]:
    """A streamed message sent while another connection holds its conversation's write lock, and
    an unauthenticated request to the same process answered while the message still waits: the
    conversation, and the message's answer (its headers, its events) once the lock was let go."""
    from app.models import Conversation

    convo = conversation(app, bearer)
    with app.app_context():
        alice = db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com"))
        lock = db.engine.connect()
    answered: list[Any] = []
    try:
        if lock.dialect.name == "sqlite":
            lock.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            lock.execute(sa.select(Conversation.id).where(Conversation.id == convo).with_for_update())

        def message() -> None:
            with streamed_post(server.base, convo, bearer, "hello") as response:
                answered.append((response.headers, events_of(response.iter_lines())))

        waiting = threading.Thread(target=message)
        waiting.start()
        # Past its stream place (taken before the message is written): it waits on the lock now.
        with app.app_context():
            from app.extensions import redis_client

            eventually(lambda: redis_client.client.zcard(f"streams:{alice}"), "the message's stream place")
        asked = time.monotonic()
        probe = httpx2.get(f"{server.base}/mcp", timeout=WAIT)  # (no token: 401 at once, on the loop)
        assert probe.status_code == 401 and not answered  # answered while the message still waits
        # ...and not after a wait for the lock on the loop (SQLite's busy timeout is 30 s: a loop
        # that waited out half of it before giving the message to a thread froze the process)
        assert time.monotonic() - asked < 15
    finally:
        lock.rollback()
        lock.close()
    waiting.join(WAIT)
    return convo, answered
