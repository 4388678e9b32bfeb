"""A message answered with its own turn: `POST /api/conversations/{id}/messages` with `Accept:
text/event-stream` (as AG-UI's and OpenAI's streaming clients ask) is answered 200 with the
conversation's events — the same events, ids and JSON as `GET …/events` — from the message's
commit to the end of the pass it started (done, paused on a card, failed, stopped), then the
stream closes. Everything before the stream is the JSON route's: the same checks and errors.

Under gunicorn the pass is queued to a worker, as for any message, and the stream follows the
conversation's Redis stream. Served by the ASGI process (`uvicorn asgi:app`, app/api/turn_server.py)
the pass runs on that process's own event loop and its events reach the stream in process: no
worker, no Redis read between the model's words and the person (issue 25). Such a stream carries
what that process appends (the turn's own events); what another process appends meanwhile (a card
decided elsewhere, a rename) reaches `GET …/events`, and the end's pending prompts are read as
they stand then."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from flask import Response, request
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header

from app import copilot, sse
from app.api.events import event_json
from app.auth import credential_check
from app.copilot.approvals import Actor
from app.extensions import db
from app.models import Conversation

if TYPE_CHECKING:
    from app.api.turn_server import Exchange

SERVER = "countersign.turn_server"  # the WSGI environ's key for the ASGI process that serves the request


def wanted() -> bool:
    """The client asks for the turn's events as the answer (wants_stream)."""
    return wants_stream(request.headers.get("Accept"))


def wants_stream(accept: str | None) -> bool:
    """`text/event-stream` is preferred to JSON by this Accept (`*/*`, none, or JSON first: JSON,
    as before). The ASGI server decides with this very function which requests get its handoff."""
    # (Parameters do not change what a type is: `text/event-stream; charset=utf-8` asks for it.)
    bare = MIMEAccept([(value.split(";", 1)[0].strip(), q) for value, q in parse_accept_header(accept, MIMEAccept)])
    return bare.best_match(["application/json", "text/event-stream"]) == "text/event-stream"


def turn(conversation: Conversation, actor: Actor, text: str) -> Any:
    """Keep the message, queue or run its pass, and answer with its events (module docstring).
    The answer is a stream like any other: it takes one of the person's places first (429 with
    nothing kept when they hold EVENTS_MAX_STREAMS_PER_PERSON)."""
    render = partial(event_json, actor=actor, conversation_id=conversation.id)
    held, after = sse.hold(actor.user.id, conversation.id)  # (`after`: before the message, so its title and turn events follow)
    try:
        server: Exchange | None = request.environ.get(SERVER)
        if server is None:
            _, run = copilot.send_message(conversation, actor, text)
            return sse.stream(conversation.id, actor.user.id, render, start=(held, after), until_run=run.id)
        handoff = server.handoff(conversation.id)  # (open before the message: its title event is handed over too)
        try:
            # A pass this server runs is claimed in the message's own commit, when it is first in
            # line; from that commit to ready() nothing may fail (the person is read before it).
            person = conversation.user
            _, run = copilot.send_message(conversation, actor, text, submit=False, claim=handoff.local)
        except BaseException:
            handoff.cancel()
            raise
    except BaseException:
        sse.let_go(actor.user.id, held)
        raise
    handoff.ready(run, person, after, render, credential_check(), partial(sse.let_go, actor.user.id, held))
    if not handoff.local:  # no room for another pass here: a worker runs it, the stream follows Redis
        copilot.submit(run.id)
    db.session.expunge_all()  # (what the stream renders with stays readable once the request ends)
    response = Response(status=200, mimetype="text/event-stream")  # its body: the ASGI server's
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response
