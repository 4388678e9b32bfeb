"""Server-Sent Events from a conversation's event stream, for the browser (HTML fragments that
htmx's SSE extension swaps in) and the API (JSON). Resumes from Last-Event-ID with no gap and no
repeat; a keep-alive comment every EVENTS_HEARTBEAT seconds; holds no database transaction."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from flask import Response, current_app, request, stream_with_context

from app.copilot import events
from app.copilot.events import Event
from app.extensions import db

EVENT_ID = re.compile(r"^\d{1,20}-\d{1,20}$")


def cursor() -> str | None:
    """Where the client says it is: Last-Event-ID (a reconnect), else ?after= / ?since=; None when
    it is not a stream id Redis could hold (then the stream starts from now)."""
    given = request.headers.get("Last-Event-ID") or request.args.get("after") or request.args.get("since")
    if not given or not EVENT_ID.match(given):
        return None
    return given if all(int(part) < 2**64 for part in given.split("-")) else None


def stream(conversation_id: int, render: Callable[[Event], tuple[str, str] | None]) -> Response:
    """The response: each event as `id`, `event` and `data` lines (`render` gives (name, data), or
    None to pass over it — its id is still sent, so a reconnect does not replay it)."""
    resumed = request.headers.get("Last-Event-ID")
    start = cursor()
    if start is None:
        start = events.replay_from(conversation_id, events.last_id(conversation_id))
    elif not resumed:
        start = events.replay_from(conversation_id, start)  # a page's cursor: replay a turn still running
    heartbeat = current_app.config["EVENTS_HEARTBEAT"]
    lasting = current_app.config["EVENTS_STREAM_SECONDS"]
    # Nothing open while the stream waits; what the request loaded (the person) stays readable.
    db.session.expunge_all()
    db.session.rollback()

    def body() -> Iterator[str]:
        yield "retry: 2000\n\n"
        for event in events.follow(conversation_id, start, heartbeat, lasting):
            if event is None:
                yield ": keep-alive\n\n"
                continue
            shown = render(event)
            db.session.rollback()
            if shown is None:
                yield f"id: {event.id}\n\n"
                continue
            name, data = shown
            lines = "".join(f"data: {line}\n" for line in data.split("\n"))
            yield f"id: {event.id}\nevent: {name}\n{lines}\n"

    response = Response(stream_with_context(body()), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
