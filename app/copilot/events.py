"""A conversation's live events: a Redis Stream per conversation (bounded, with a TTL) that the
turn's worker appends to and every open page or API client follows. The stream is a view: the
database holds the messages; a lost stream loses only the live parts of a turn in progress."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
from flask import current_app
from redis.exceptions import RedisError

from app.copilot import kept_events, taps
from app.copilot.stream_append import GONE, appender
from app.extensions import redis_client, redis_from_url
from app.logs import Sparing
from app.status import PASS_ENDS, EventType, TurnState

log = logging.getLogger(__name__)
unpublished = Sparing(log)  # (an outage: one line every few seconds, not one an event)
NOT_SENT = "event %s of conversation %s not sent to its open pages (Redis: %s); they catch up once it answers"


@dataclass(frozen=True)
class Event:
    """One entry of a conversation's stream: its id (Redis's, also the SSE id), its type and data.
    `known`: what the process that appended it already holds for its views in that process (its
    taps' readers), so that they need not read it back: never sent to Redis, None when read from it."""

    id: str
    type: str
    data: dict[str, Any]
    known: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def run(self) -> int | None:
        run = self.data.get("run")
        return int(run) if run is not None else None

    def ends_turn(self) -> bool:
        return self.type == EventType.TURN and self.data.get("state") in PASS_ENDS  # (a pass's start and end bracket it)


def key(conversation_id: int) -> str:
    return f"events:{conversation_id}"


class Refused(Exception):
    """The event was not appended: the key it was to be held back by exists (a stop asked for)."""


class Gone(Exception):
    """The event was not appended: it was to follow others, and the stream is gone (Redis came
    back empty): what it follows must be sent again with it."""


def publish(
    conversation_id: int,
    type: str,
    unless: str | None = None,
    forget: tuple[str, ...] = (),
    alive: tuple[str, int] | None = None,
    known: dict[str, Any] | None = None,
    follows: bool = False,
    **data: Any,
) -> str | None:
    """Append an event (trimmed to EVENTS_MAXLEN, kept EVENTS_TTL seconds after the last one); its
    id, or None when Redis is away (the turn goes on: the database is the truth; what a page must
    still learn is published later: app.copilot.kept_events). With `unless`, a Redis key: Refused when
    it exists, and then nothing was appended (nor deleted or set). In the same round trip, the keys
    in `forget` are deleted and `alive` (a key, seconds) is set. `known` goes with the event to this
    process's taps only (Event.known). With `follows`, the event continues others (a reply's next
    words): Gone when the stream is no longer there, and then nothing was appended."""
    if kept_events.waiting():
        publish_later(wait=True)  # (first: the events kept while Redis was away go out in their order)
    try:
        appended = _append(conversation_id, type, unless, forget, alive, known, data, follows)
    except RedisError as error:
        unpublished.warning(NOT_SENT, type, conversation_id, error)
        if unless is None and alive is None:
            kept_events.keep(conversation_id, type, known, data)
        return None
    unpublished.ok("events reach open pages again: Redis answers")
    return appended


def _append(
    conversation_id: int,
    type: str,
    unless: str | None,
    forget: tuple[str, ...],
    alive: tuple[str, int] | None,
    known: dict[str, Any] | None,
    data: dict[str, Any],
    follows: bool = False,
) -> str:
    config = current_app.config
    keys = [key(conversation_id), *([unless] if unless else []), *forget, *([alive[0]] if alive else [])]
    args = [
        config["EVENTS_MAXLEN"],
        type,
        json.dumps(data),
        config["EVENTS_TTL"],
        1 if unless else 0,
        len(forget),
        alive[1] if alive else "",
        1 if follows else 0,
    ]
    event_id = appender()(keys=keys, args=args)
    if event_id is None:
        raise Refused(unless)
    if event_id == GONE:
        raise Gone()
    appended = _text(event_id)
    taps.hand_over(conversation_id, Event(appended, str(type), data, known))
    return appended


def publish_later(wait: bool = False) -> int:
    """Publish the events kept while Redis was away, in order, until Redis fails again: how many
    went. One thread at a time: with another one flushing, none here, or with `wait` (an event
    about to follow them) after it is done."""
    kept, flushing = kept_events.kept(), kept_events.flushing()
    if not kept or not flushing.acquire(blocking=wait):
        return 0
    sent = 0
    try:
        while kept:
            conversation_id, type, known, data = kept[0]
            try:
                _append(conversation_id, type, None, (), None, known, data)
            except RedisError:
                break
            kept.popleft()
            sent += 1
    finally:
        flushing.release()
    if sent:
        log.info("%d events kept while Redis was away published", sent)
    return sent


def card_changed(conversation_id: int, approval_id: str, status: str) -> None:
    """Tell every open view of the conversation that this card changed (its status, or a fresh
    card made in its place): each renders it again for its own viewer."""
    publish(conversation_id, EventType.APPROVAL, id=approval_id, status=str(status))


def retitled(conversation_id: int, title: str | None = None) -> None:
    """Tell the conversation's open views that its title changed (they read it afresh: the event
    carries none), so every tab's heading, list and tab title follow, whoever wrote it. `title`,
    the one just committed: this process's own views take it as known (Event.known)."""
    publish(conversation_id, EventType.TITLE, known=None if title is None else {"title": title})


def last_id(conversation_id: int) -> str:
    """The id of the newest event ("0-0" for none): a page rendered now has seen up to here."""
    try:
        return newest_id(newest(redis_client.client, conversation_id))
    except RedisError:
        return "0-0"


def newest(redis: Any, conversation_id: int) -> Any:
    """The newest event as last_id() reads it: on a client, the reply; on a pipeline, queued (so
    that a streamed message's answer takes its place among the person's streams and finds where
    it starts in one round trip: app.sse.hold)."""
    return redis.xrevrange(key(conversation_id), count=1)


def newest_id(reply: list[Any] | None) -> str:
    """newest()'s reply as an id ("0-0" for none, or for no reply: Redis was away)."""
    return _text(reply[0][0]) if reply else "0-0"


def look_back(redis: Any, conversation_id: int, before: str | None) -> Any:
    """A page of the stream as replay_from() reads it, newest first, from `before` (None: the
    newest) back: on a client, its events; on a pipeline, queued (so that a stream's opening asks
    Redis once: its place among the person's streams and where to start, together)."""
    return redis.xrevrange(key(conversation_id), max="+" if before is None else before, count=REPLAY_PAGE)


def replay_from(conversation_id: int, cursor: str | None, first: list[Any] | None = None) -> str:
    """Where a new follower starts, given the last event its page reflects (None: the newest, as
    last_id() would say, read in the same round trip): from the start of a turn still running at
    `cursor` (its parts so far are not in the database), else from cursor. A started turn's events
    replace its live bubble, so replaying them shows nothing twice. Reads back from cursor a page
    at a time (the newest turn event is usually among the last few); `first`, the first page when
    look_back() already read it. A reply whose start Redis lost (it came back empty) starts at its
    first words marked `whole`, which carry it all so far."""
    ended: set[int] = set()
    whole: str | None = None  # (the oldest such words of a reply still running, read back to here)
    newest = "+" if cursor is None else cursor
    for _ in range(REPLAY_PAGES):
        try:
            page: list[tuple[Any, dict[Any, Any]]] = (
                first if first is not None else look_back(redis_client.client, conversation_id, newest)
            )
        except RedisError:
            return cursor or "0-0"
        first = None
        if cursor is None:
            cursor = _text(page[0][0]) if page else "0-0"
        for raw_id, fields in page:
            event = _event(raw_id, fields)
            if event.ends_turn() and event.run is not None:
                ended.add(event.run)
            elif event.type == EventType.TURN and event.data.get("state") == TurnState.STARTED:
                return _before(event.id) if event.run not in ended else whole or cursor
            elif event.type == EventType.TEXT and event.data.get("whole") and event.run not in ended:
                whole = _before(event.id)
        if len(page) < REPLAY_PAGE:
            return whole or cursor
        newest = _before(_text(page[-1][0]))
    return whole or cursor or "0-0"


REPLAY_PAGE, REPLAY_PAGES = 50, 10  # at most 500 events back, as a stream holds a turn's parts


def text_before(conversation_id: int, run: object, step: object, before: str) -> str:
    """A pass's streamed text up to (not including) event `before`: what a follower that joined
    mid-reply (a reconnect with Last-Event-ID) has not seen, so it can show the whole of it."""
    pieces: list[str] = []
    try:
        entries: list[tuple[Any, dict[Any, Any]]] = redis_client.client.xrevrange(  # type: ignore[assignment]
            key(conversation_id), max=_before(before), count=current_app.config["EVENTS_MAXLEN"]
        )
    except RedisError:
        return ""
    for raw_id, fields in entries:
        event = _event(raw_id, fields)
        if event.run != run or event.data.get("step") != step:
            continue
        if event.type == EventType.TURN:
            break
        if event.type == EventType.TEXT:
            pieces.append(str(event.data.get("text", "")))
            if event.data.get("whole"):  # (the whole text up to it: nothing before counts)
                break
    return "".join(reversed(pieces))


def read(conversation_id: int, after: str, block_ms: int | None) -> list[Event]:
    """Events after `after`, waiting up to block_ms for the first (None: do not wait)."""
    client = _blocking_client()
    reply: list[tuple[Any, list[tuple[Any, dict[Any, Any]]]]] | None = client.xread(  # type: ignore[assignment]
        {key(conversation_id): after}, block=block_ms, count=200
    )
    return [_event(raw_id, fields) for _, entries in reply or [] for raw_id, fields in entries]


def follow(conversation_id: int, after: str, heartbeat_s: float, for_s: float) -> Iterator[Event | None]:
    """Events as they come for for_s seconds (then the client reconnects with Last-Event-ID, which
    also lets a server recycle its threads); None every heartbeat_s of silence (a keep-alive)."""
    import time

    deadline = time.monotonic() + for_s
    while (left := deadline - time.monotonic()) > 0:
        events = read(conversation_id, after, max(1, int(min(heartbeat_s, left) * 1000)))
        if not events:
            yield None
        for event in events:
            after = event.id
            yield event


def wait_for_end(conversation_id: int, run_id: int, after: str, seconds: float) -> Event | None:
    """Block until the turn of run_id ends (or `seconds` pass): the end event, or None. Each read
    blocks at most EVENTS_HEARTBEAT seconds, so it never outlasts the blocking client's socket
    (HEARTBEAT + 10 s): a wait longer than that (TURN_WAIT) is several reads, not a socket timeout."""
    import time

    longest = float(current_app.config["EVENTS_HEARTBEAT"])
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        for event in read(conversation_id, after, max(1, int(min(left, longest) * 1000))):
            after = event.id
            if event.ends_turn() and event.run == run_id:
                return event
    return None


def _blocking_client() -> redis.Redis:
    """A client whose socket waits longer than any XREAD BLOCK (the shared one times out at 2 s)."""
    extensions = current_app.extensions
    if "redis_blocking" not in extensions:
        url = current_app.config.get("REDIS_URL")
        extensions["redis_blocking"] = (
            # One connection per open stream (redis-py's default pool stops at 100).
            redis_from_url(
                url,
                socket_timeout=current_app.config["EVENTS_HEARTBEAT"] + 10,
                socket_connect_timeout=2,
                health_check_interval=30,
                max_connections=100_000,
            )
            if url
            else redis_client.client
        )
    return extensions["redis_blocking"]  # type: ignore[no-any-return]


def _before(event_id: str) -> str:
    """The id just before this one, so XREAD from it includes the event itself."""
    ms, _, seq = event_id.partition("-")
    return f"{ms}-{int(seq) - 1}" if int(seq) > 0 else f"{int(ms) - 1}-18446744073709551615"


def _event(raw_id: Any, fields: dict[Any, Any]) -> Event:
    decoded = {_text(k): _text(v) for k, v in fields.items()}
    return Event(id=_text(raw_id), type=decoded.get("type", ""), data=json.loads(decoded.get("data") or "{}"))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
