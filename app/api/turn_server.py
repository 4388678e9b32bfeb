"""The ASGI side of a message answered with its own turn (app/api/streamed.py): the request goes
through the Flask app as any other (the same authentication, limits, checks and errors: on this
loop, waiting there for a lock 10 ms at most, else in a thread), and when the view hands the turn
over, this server runs its pass as a task on its own event loop — a worker that takes its jobs
from the people it answers — and writes the pass's events to the response as the pass appends
them (app.copilot.taps), with no Redis read between them.

A pass here is a pass anywhere: claimed by the same conditional UPDATE (at most once), alive by
its heartbeat (a process that dies leaves it to the sweep: interrupted), stopped by the same stop
key, its words and its end appended to the conversation's Redis stream for every other view and
for a resume. At most WORKER_THREADS passes run here at once; past that a message's pass is queued
to the workers and its stream follows Redis, as it does when the pass was not this server's to run
(its conversation was busy). A person who goes away ends the stream, never the pass."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import Flask
from redis.exceptions import RedisError
from starlette.types import Receive, Scope, Send

from app import copilot
from app.api import asgi_request
from app.api.streamed import SERVER, wants_stream
from app.copilot import events, taps
from app.copilot.events import Event
from app.extensions import AGAIN, OnLoop, db, no_lock_wait, on_loop
from app.logs import Sparing
from app.models import Run, User
from app.sse import lines
from app.status import RunStatus

log = logging.getLogger(__name__)
ended_unheard = Sparing(log)  # (each client reconnects every 2 s while Redis is away)


# After a request tried on the loop found a lock held, the streamed messages of the next
# LOCK_BACKOFF_S go straight to threads. A lock held for seconds (another process's transaction)
# is usually met by a burst: each try costs the loop its wait for the lock (LOOP_LOCK_WAIT_MS) and,
# with every pooled connection held by a thread that waits, its wait for one (loop_pool), and
# tried one after another they held up the whole process (bench/README, 2026-12-07: 100 messages
# under an 8 s SQLite lock, a request needing no database answered 4.6 s late; with it, 91 ms).
LOCK_BACKOFF_S = 1.0
DISPATCHERS = 64  # threads for the requests (each through the Flask app; a JSON answer may wait up to TURN_WAIT)
READERS = 64  # threads for the streams that read Redis (a pass that is not here): each blocks in an XREAD
FOLLOW_REDIS = object()  # on a tap: the pass is not (or no longer) here, read the rest from Redis
RATE_LIMIT_HEADERS = b"x-ratelimit-"  # (Flask-Limiter's, lowercased as every header here)

Headers = list[tuple[bytes, bytes]]
Answer = tuple[int, Headers, bytes]  # a request's status, headers and body, as _dispatch gives them


class Handoff:
    """One streamed turn, from the Flask view to this server: its tap, its run, how to render."""

    def __init__(self, conversation_id: int, local: bool, loop: asyncio.AbstractEventLoop) -> None:
        self.conversation_id, self.local = conversation_id, local
        self.tap = taps.tap(conversation_id, loop)
        self.run_id: int | None = None
        self.claimed: copilot.Claimed | None = None  # the run, when its message's commit claimed it for this server
        self.reading: asyncio.Future[list[Event]] | None = None  # a Redis read under way, when following Redis

    def ready(
        self,
        run: Run,
        person: User,
        after: str,
        render: Callable[[Event], Any],
        live: Callable[[], bool],
        let_go: Callable[[], None],
    ) -> None:
        """The message and its run are committed (the run claimed for this server when it is
        `running`; `person`, the conversation's, goes to its pass with it): the stream starts after
        `after`; `live` says whether its credential still is, `let_go` gives back its place among
        the person's streams."""
        self.run_id, self.after, self.render, self.live, self.let_go = run.id, after, render, live, let_go
        self.claimed = copilot.Claimed(run, person) if run.status == RunStatus.RUNNING else None

    def cancel(self) -> None:
        self.tap.close()


class Exchange:
    """What the Flask view finds in its environ (streamed.SERVER) when this server serves it."""

    def __init__(self, server: TurnServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop
        self.taken: Handoff | None = None

    def handoff(self, conversation_id: int) -> Handoff:
        """A Handoff whose pass runs here when there is room (`local`), else on a worker."""
        self.taken = Handoff(conversation_id, len(self.server.passes) < self.server.limit, self.loop)
        return self.taken


class TurnServer:
    """ASGI: `POST /api/conversations/<id>/messages`, through the Flask app, then the turn's stream."""

    def __init__(self, flask_app: Flask) -> None:
        self.flask_app = flask_app
        config = flask_app.config
        self.limit, self.timeout = config["WORKER_THREADS"], config["TURN_TIMEOUT"]
        # A streamed message's request runs on the loop, waiting there for a lock 10 ms at most
        # (_on_loop); under the `inline` runner in a thread (it would run a pass from the request,
        # inside this loop).
        self.requests_on_loop = config["TURNS_RUNNER"] != "inline"
        self.lock_seen_at = -math.inf  # when a request tried on the loop last found a lock held
        self.passes: set[asyncio.Task[None]] = set()
        # Every other request goes through the Flask app in a thread (its SQL and Redis calls may
        # wait: a locked SQLite, a JSON answer waiting for its turn), never on the loop; streams whose
        # pass runs elsewhere read Redis in threads of another pool (a blocking XREAD each), so
        # neither can starve the other.
        self.dispatchers = ThreadPoolExecutor(max_workers=DISPATCHERS, thread_name_prefix="countersign-request")
        self.readers = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="countersign-follow")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await asgi_request.body(receive, self.flask_app.config.get("MAX_CONTENT_LENGTH"))
        if body is None:
            await asgi_request.plain(send, 413, b"Request body too large.")
            return
        loop = asyncio.get_running_loop()
        environ, exchange = self._request(scope, body, loop)
        tried_on_loop = SERVER in environ and self.requests_on_loop and time.monotonic() - self.lock_seen_at >= LOCK_BACKOFF_S
        answer, counted = self._on_loop(environ) if tried_on_loop else (None, [])
        if answer is None:  # (in a thread: not streamed, a lock held lately, or it would have waited on the loop)
            if tried_on_loop:
                environ, exchange = self._request(scope, body, loop)  # (the first try was undone)
                environ[AGAIN] = True
            answer = _with_headers(await loop.run_in_executor(self.dispatchers, self._dispatch, environ), counted)
        status, headers, content = answer
        handoff = exchange.taken
        if handoff is not None and (handoff.run_id is None or status != 200):
            self._give_up(handoff)  # (the view failed after opening it)
            handoff = None
        if handoff is not None and handoff.local:
            self._start_pass(handoff)
        if handoff is not None:  # (the view's empty body said Content-Length: 0; the stream is not empty)
            headers = [(k, v) for k, v in headers if k != b"content-length"]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if handoff is None:
            await send({"type": "http.response.body", "body": content})
            return
        await self._stream(handoff, receive, send)

    def _request(self, scope: Scope, body: bytes, loop: asyncio.AbstractEventLoop) -> tuple[dict[str, Any], Exchange]:
        """The request's WSGI environ, and its exchange with this server (a streamed message's)."""
        environ, exchange = asgi_request.environ_of(scope, body), Exchange(self, loop)
        if wants_stream(environ.get("HTTP_ACCEPT")):  # (else a message waited for as Prefer says, up to TURN_WAIT)
            environ[SERVER] = exchange
        return environ, exchange

    def _on_loop(self, environ: dict[str, Any]) -> tuple[Answer | None, Headers]:
        """A streamed message's request on this loop, which it may not hold up: no lock is waited
        for there (extensions.on_loop: PostgreSQL's row lock NOWAIT; extensions.no_lock_wait: any
        lock LOOP_LOCK_WAIT_MS at most, SQLite's write lock among them). Its answer; or None when
        a lock would have been waited for: the request was undone (nothing kept, its stream place
        given back) and the caller runs it again in a thread (marked AGAIN: its rate limits are not
        counted twice), with the X-RateLimit headers its try on the loop was answered with (the
        count they tell is the one that stands). Requests in threads take the GIL from the loop
        that starts the passes, which then start once the burst of them is through. Measured
        (bench/README, 2026-12-07), streamed L1, pairs against the thread: on PostgreSQL turn end
        p99 5.62 / 5.78 / 5.87 / 5.39 -> 5.10 / 5.17 / 4.66 / 4.39 s; on SQLite 3476 / 3408 / 3371
        / 3530 / 3740 -> 3398 / 3220 / 3202 / 3309 / 3481 ms, the POST answered in half the time. (On
        SQLite it was reverted once: with another process holding the write lock, a burst of such
        requests froze the loop, which waited for a pooled connection that threads waiting for the
        lock held. It no longer does (app/loop_pool.py), and LOCK_BACKOFF_S spares it the rest.)"""
        tried = OnLoop()
        context = contextvars.Context()
        context.run(on_loop.set, tried)
        context.run(no_lock_wait.set, True)
        answer = self._dispatch(environ, context)
        if tried.locks:
            self.lock_seen_at = time.monotonic()
            return None, [(k, v) for k, v in answer[1] if k.startswith(RATE_LIMIT_HEADERS)]
        return answer, []

    def _dispatch(self, environ: dict[str, Any], context: contextvars.Context | None = None) -> Answer:
        """The request through the Flask app (in a thread of `dispatchers`, or on the loop)."""
        started: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
            started["status"], started["headers"] = int(status.split()[0]), headers
            return lambda data: None  # (PEP 3333's write(); Flask never calls it)

        # In a context of its own, as a WSGI server gives each request: an app context the server
        # was started in (`flask mcp` runs under one) would otherwise be shared by every request,
        # and with it `g`, where Flask-Login keeps the signed-in person.
        result = (context or contextvars.Context()).run(self.flask_app, environ, start_response)
        try:
            content = b"".join(result)
        finally:
            getattr(result, "close", lambda: None)()
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in started["headers"]]
        return started["status"], headers, content

    def _give_up(self, handoff: Handoff) -> None:
        """A handoff whose answer will not be its stream: its tap closed; once its run was kept,
        its pass still runs — here when it was claimed for this server, else on the workers
        (nothing else would run it) — and its stream place is given back."""
        handoff.cancel()
        if handoff.run_id is None:
            return
        if handoff.claimed is not None:
            self._start_pass(handoff)
        else:
            with self.flask_app.app_context():
                copilot.submit(handoff.run_id)
        with self.flask_app.app_context():
            handoff.let_go()

    def _start_pass(self, handoff: Handoff) -> None:
        task = asyncio.create_task(self._pass(handoff))
        self.passes.add(task)
        task.add_done_callback(self.passes.discard)

    async def _pass(self, handoff: Handoff) -> None:
        """The turn's pass on this loop; when it was not this server's to run (or broke before its
        end), the stream reads the rest from Redis."""
        try:
            async with asyncio.timeout(self.timeout):
                assert handoff.run_id is not None
                await copilot.execute(self.flask_app, handoff.run_id, handoff.claimed)
        except TimeoutError:
            log.error("the pass of run %s ran over %s s: cancelled (its run ends interrupted)", handoff.run_id, self.timeout)
        except Exception:
            log.exception("the pass of run %s raised", handoff.run_id)
        finally:
            # (After a pass that ended here its end was handed over first, and the stream is done;
            # else the rest, if any, comes from Redis: a pass of another process, or the sweep's.)
            handoff.tap.put(FOLLOW_REDIS)

    async def _stream(self, handoff: Handoff, receive: Receive, send: Send) -> None:
        """The turn's events until its pass ends, the person goes away, or EVENTS_STREAM_SECONDS."""
        config = self.flask_app.config
        gone = asyncio.create_task(asgi_request.disconnected(receive))
        recheck, heartbeat = config["EVENTS_RECHECK"], config["EVENTS_HEARTBEAT"]
        deadline = time.monotonic() + config["EVENTS_STREAM_SECONDS"]
        checked, seen, tapped = time.monotonic(), handoff.after, handoff.local
        # One app context for the stream's life, in this task alone (each render reads and rolls
        # back: no transaction stays open while it waits).
        in_app = self.flask_app.app_context()
        in_app.push()
        try:
            await send({"type": "http.response.body", "body": b"retry: 2000\n\n", "more_body": True})
            while (left := deadline - time.monotonic()) > 0 and not gone.done():
                if time.monotonic() - checked >= recheck:
                    if not _rolled_back(handoff.live):
                        break
                    checked = time.monotonic()
                wait = min(left, heartbeat, recheck)
                got = await self._next(handoff, tapped, seen, wait, gone)
                if got is FOLLOW_REDIS:
                    tapped = False
                    continue
                if not got:
                    await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                    continue
                for event in got:
                    if not _after(event.id, seen):
                        continue  # (handed over already, read again from Redis)
                    seen = event.id
                    await send({"type": "http.response.body", "body": self._render(handoff, event), "more_body": True})
                    if event.ends_turn() and event.run == handoff.run_id:
                        return
        except RedisError as error:  # (following Redis: the stream ends whole, the client resumes after `retry`)
            ended_unheard.warning("a streamed turn's stream ended: Redis did not answer (%s); its client reconnects", error)
        finally:
            handoff.let_go()
            in_app.pop()
            handoff.tap.close()
            gone.cancel()
            try:
                await send({"type": "http.response.body", "body": b""})
            except Exception:  # (the person went away)
                pass

    async def _next(self, handoff: Handoff, tapped: bool, after: str, wait: float, gone: asyncio.Task[None]) -> Any:
        """The next events: from the tap while the pass is here, else from Redis (in a thread)."""
        if tapped:
            try:
                event = await handoff.tap.get(wait)
            except TimeoutError:
                return []
            return event if event is FOLLOW_REDIS else [event]
        if handoff.reading is None:
            loop = asyncio.get_running_loop()
            handoff.reading = loop.run_in_executor(self.readers, self._read, handoff.conversation_id, after, int(wait * 1000))
        reading: asyncio.Future[Any] = handoff.reading
        waiting: set[asyncio.Future[Any]] = {reading, gone}
        # (Not past `wait` plus a second: a read still waiting for a thread leaves a keep-alive.)
        done, _ = await asyncio.wait(waiting, timeout=wait + 1, return_when=asyncio.FIRST_COMPLETED)
        if reading not in done:
            return []
        handoff.reading = None
        return reading.result()

    def _read(self, conversation_id: int, after: str, block_ms: int) -> list[Event]:
        return self._in_app(lambda: events.read(conversation_id, after, max(1, block_ms)))

    def _render(self, handoff: Handoff, event: Event) -> bytes:
        return lines(event, _rolled_back(lambda: handoff.render(event))).encode()

    def _in_app(self, work: Callable[[], Any]) -> Any:
        with self.flask_app.app_context():
            try:
                return work()
            finally:
                db.session.rollback()

    async def close(self, grace: float) -> None:
        """Stopping: the passes running here get `grace` seconds to end, then are cancelled (their
        runs, no longer said alive, end interrupted by the sweep)."""
        if self.passes and grace > 0:
            await asyncio.wait(set(self.passes), timeout=grace)
        for task in list(self.passes):
            task.cancel()
        self.readers.shutdown(wait=False, cancel_futures=True)
        self.dispatchers.shutdown(wait=False, cancel_futures=True)


def _with_headers(answer: Answer, carried: Headers) -> Answer:
    """The answer, with each of the `carried` headers it does not already have."""
    status, headers, content = answer
    have = {k for k, _ in headers}
    return status, [*headers, *((k, v) for k, v in carried if k not in have)], content


def _rolled_back(work: Callable[[], Any]) -> Any:
    try:
        return work()
    finally:
        db.session.rollback()


def _after(event_id: str, seen: str) -> bool:
    """Whether stream id `event_id` comes after `seen` (ids are "ms-seq")."""
    a, _, b = event_id.partition("-")
    c, _, d = seen.partition("-")
    return (int(a), int(b or 0)) > (int(c), int(d or 0))
