"""Server-Sent Events from a conversation's event stream, for the browser (HTML fragments that
htmx's SSE extension swaps in) and the API (JSON). Resumes from Last-Event-ID with no gap and no
repeat; a keep-alive comment every EVENTS_HEARTBEAT seconds; holds no database transaction."""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from flask import Response, current_app, request, stream_with_context
from redis.exceptions import RedisError

from app.auth import credential_check
from app.copilot import events
from app.copilot.events import Event
from app.errors import TooManyAttempts
from app.extensions import db, redis_client
from app.logs import Sparing

log = logging.getLogger(__name__)
ended_unheard = Sparing(log)  # (every open page reconnects every 2 s while Redis is away)

EVENT_ID = re.compile(r"^\d{1,20}-\d{1,20}$")


def cursor() -> str | None:
    """Where the client says it is: Last-Event-ID (a reconnect), else ?after= / ?since=; None when
    it is not a stream id Redis could hold (then the stream starts from now)."""
    given = request.headers.get("Last-Event-ID") or request.args.get("after") or request.args.get("since")
    if not given or not EVENT_ID.match(given):
        return None
    return given if all(int(part) < 2**64 for part in given.split("-")) else None


def stream(
    conversation_id: int,
    person_id: int,
    render: Callable[[Event], tuple[str, str] | None],
    start: tuple[str, str] | None = None,
    until_run: int | None = None,
) -> Response:
    """The response: each event as `id`, `event` and `data` lines (`render` gives (name, data), or
    None to pass over it — its id is still sent, so a reconnect does not replay it). A person has
    at most EVENTS_MAX_STREAMS_PER_PERSON open (each holds a server thread); the stream ends when
    its credential does (sign-out, a revoked token), checked every EVENTS_RECHECK seconds. With
    `start` (a place hold() took, and an event id), it starts after that event in that place; with
    `until_run`, it ends with that run's pass."""
    redis = redis_client.client  # (closing may happen outside the app's context)
    held, start_after = start or _hold_and_start(redis, conversation_id, person_id)
    config = current_app.config
    heartbeat, lasting, recheck = config["EVENTS_HEARTBEAT"], config["EVENTS_STREAM_SECONDS"], config["EVENTS_RECHECK"]
    # Nothing open while the stream waits; what the request loaded (the person) stays readable.
    db.session.expunge_all()
    db.session.rollback()
    still_signed_in = credential_check()

    def body() -> Iterator[str]:
        checked = time.monotonic()
        try:
            yield "retry: 2000\n\n"
            for event in events.follow(conversation_id, start_after, min(heartbeat, max(1, recheck)), lasting):
                if time.monotonic() - checked >= recheck:
                    if not still_signed_in():
                        return
                    checked = time.monotonic()
                if event is None:
                    yield ": keep-alive\n\n"
                    continue
                shown = render(event)
                db.session.rollback()
                yield lines(event, shown)
                if until_run is not None and event.ends_turn() and event.run == until_run:
                    return
        except RedisError as error:  # (the stream ends whole; the client comes back after `retry`)
            ended_unheard.warning("an event stream ended: Redis did not answer (%s); its client reconnects", error)
        finally:
            give_back()

    # The body's end and the response's close each let the stream's place go (a server usually
    # reaches both, whichever comes first does it): once.
    give_back = _once(lambda: _let_go(redis, person_id, held))
    return _response(body(), give_back)


def _response(body: Iterator[str], on_close: Callable[[], None]) -> Response:
    response = Response(stream_with_context(body), mimetype="text/event-stream")
    response.call_on_close(on_close)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


def _hold_and_start(redis: Any, conversation_id: int, person_id: int) -> tuple[str, str]:
    """The stream's place among the person's open streams, and the event it starts after: the
    client's Last-Event-ID (a reconnect), else from the newest event or a page's cursor, replaying
    a turn still running (its first look back in the same round trip as the place)."""
    given = cursor()
    if given is not None and request.headers.get("Last-Event-ID"):
        return _hold_a_stream(redis, person_id, None)[0], given
    held, page = _hold_a_stream(redis, person_id, partial(events.look_back, conversation_id=conversation_id, before=given))
    return held, events.replay_from(conversation_id, given, page)


def lines(event: Event, shown: tuple[str, str] | None) -> str:
    """An event as a stream sends it: its id, then its name and data as `render` gave them (None:
    only its id, so a reconnect does not replay an event the viewer is not shown)."""
    if shown is None:
        return f"id: {event.id}\n\n"
    name, data = shown
    return f"id: {event.id}\nevent: {name}\n{data_lines(data)}\n"


def data_lines(data: str) -> str:
    """`data:` lines for a payload. A CR, LF or CRLF anywhere ends an SSE line, so each becomes a
    line of its own: what the payload says can never add a field or an event to the stream."""
    return "".join(f"data: {line}\n" for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def hold(person_id: int, conversation_id: int) -> tuple[str, str]:
    """A place among the person's open streams for a stream about to start (its id), taken before
    what it follows is kept, and the conversation's newest event now (events.last_id()), which the
    stream starts after: both in one round trip. TooManyAttempts (429) when the person holds
    EVENTS_MAX_STREAMS_PER_PERSON."""
    held, newest = _hold_a_stream(redis_client.client, person_id, partial(events.newest, conversation_id=conversation_id))
    return held, events.newest_id(newest)


def let_go(person_id: int, held: str) -> None:
    """Give back a place hold() took."""
    _let_go(redis_client.client, person_id, held)


def _streams_key(person_id: int) -> str:
    return f"streams:{person_id}"


def watching(person_id: int) -> bool:
    """Whether the person has a live view open now (a page, or a client, following events)."""
    return bool(redis_client.client.zcount(_streams_key(person_id), time.time(), "+inf"))


def _hold_a_stream(redis: Any, person_id: int, look_back: Callable[[Any], None] | None) -> tuple[str, list[Any] | None]:
    """Count this stream against the person's limit (a sorted set of open streams, each with the
    time it ends at the latest, so a stream whose process died stops counting): its id, or
    TooManyAttempts (429). In the same round trip, `look_back` queues what the stream reads to
    find where it starts: its reply comes back too (None without one, or without Redis)."""
    config = current_app.config
    mine, now = secrets.token_hex(8), time.time()
    key = _streams_key(person_id)
    try:
        pipe = redis.pipeline()
        pipe.zremrangebyscore(key, 0, now)
        pipe.zadd(key, {mine: now + config["EVENTS_STREAM_SECONDS"] + 60})
        pipe.zcard(key)
        pipe.expire(key, config["EVENTS_STREAM_SECONDS"] + 120)
        if look_back is not None:
            look_back(pipe)
        _, _, open_now, _, *looked = pipe.execute()
    except RedisError:
        return mine, None  # no Redis, no stream either: events.read fails and the client retries
    if open_now > config["EVENTS_MAX_STREAMS_PER_PERSON"]:
        _let_go(redis, person_id, mine)
        raise TooManyAttempts(
            f"Too many live views are open for you ({config['EVENTS_MAX_STREAMS_PER_PERSON']}): close a tab and try again.",
            retry_after=30,
        )
    return mine, looked[0] if looked else None


def _once(act: Callable[[], None]) -> Callable[[], None]:
    """`act`, done the first time the result is called and never again."""
    done = threading.Lock()

    def first_time() -> None:
        if done.acquire(blocking=False):
            act()

    return first_time


def _let_go(redis: Any, person_id: int, held: str) -> None:
    try:
        redis.zrem(_streams_key(person_id), held)
    except RedisError:
        pass
