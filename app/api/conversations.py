"""A person's conversations over the API: start, list, rename, delete, read; a message, a retry, a
stop."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import current_app, jsonify, request

from app import copilot
from app.api import streamed
from app.api.blueprint import body, bp, own_conversation
from app.api.replies import turn_reply
from app.api.shapes import conversation_json, message_json, pending_in
from app.auth import current_actor
from app.copilot import conversations, events
from app.copilot.text import check_message
from app.errors import BadValues
from app.extensions import db, limit_per_person_and_address
from app.models import Message


@bp.post("/conversations")
def create_conversation() -> Any:
    actor = current_actor("api")
    conversation = conversations.start(actor.user)
    db.session.commit()
    return jsonify(id=conversation.id), 201


@bp.get("/conversations")
def list_conversations() -> Any:
    """The person's conversations, newest first (at most 100); `q` keeps those whose title or
    words hold it (literally: `%` and `_` are no wildcards)."""
    actor = current_actor("api")
    found = conversations.listed(actor.user, request.args.get("q", ""))
    return jsonify(conversations=[conversation_json(c) for c in found])


@bp.patch("/conversations/<id:conversation_id>")
def rename_conversation(conversation_id: int) -> Any:
    """Rename (`{"title"}`); the person's own credentials only, never an agent's (403)."""
    actor = current_actor("api")
    conversation = conversations.rename(own_conversation(conversation_id, actor), actor, body().get("title"))
    return jsonify(conversation_json(conversation))


@bp.delete("/conversations/<id:conversation_id>")
def delete_conversation(conversation_id: int) -> Any:
    """Delete: 404 from then on; its open cards end `cancelled`; 409 while a turn runs; 403 for an
    agent credential (ending cards is answering them)."""
    actor = current_actor("api")
    ended = conversations.delete(own_conversation(conversation_id, actor), actor)
    return jsonify(id=conversation_id, deleted=True, cancelled=[a.id for a in ended])


@bp.get("/conversations/<id:conversation_id>")
def get_conversation(conversation_id: int) -> Any:
    """A conversation of the person's: its messages and what waits for them."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    copilot.expire_due(conversation.id)
    copilot.sweep_dead(current_app.config["TURN_DEAD_AFTER"], conversation.id)
    messages = db.session.scalars(sa.select(Message).where(Message.conversation_id == conversation.id).order_by(Message.id))
    return jsonify(
        id=conversation.id,
        title=conversation.title,
        messages=[message_json(m) for m in messages],
        pending=pending_in(conversation.id, actor),
    )


@bp.post("/conversations/<id:conversation_id>/messages")
@limit_per_person_and_address("MESSAGES")
def post_message(conversation_id: int) -> Any:
    """Say something; the turn is queued and waited for as `Prefer` says (DESIGN §5), or, asked
    with `Accept: text/event-stream`, answered with its own events (app/api/streamed.py)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    text = body().get("text")
    if not isinstance(text, str) or not text.strip():
        raise BadValues("`text` must be a non-empty string.")
    text = check_message(text, current_app.config["MESSAGE_MAX_CHARS"])  # whole, or a 4xx: never cut
    if streamed.wanted():  # Accept: text/event-stream: answered with the turn's own events
        return streamed.turn(conversation, actor, text)
    cursor = events.last_id(conversation.id)
    said, run = copilot.send_message(conversation, actor, text)
    return turn_reply(conversation.id, run.id, [said], said.id, cursor, actor)


@bp.post("/conversations/<id:conversation_id>/retry")
@limit_per_person_and_address("MESSAGES")  # a retry runs a turn, as a message does
def retry(conversation_id: int) -> Any:
    """Run the last pass again after it failed or was interrupted (a second press queues nothing);
    an agent credential only a turn it started itself (403 otherwise: copilot.check_own)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    cursor = events.last_id(conversation.id)
    before = copilot.newest_message_id(conversation.id)
    run = copilot.retry(conversation, actor)
    return turn_reply(conversation.id, run.id if run else None, [], before, cursor, actor)


@bp.post("/conversations/<id:conversation_id>/stop")
def stop(conversation_id: int) -> Any:
    """End the running turn at its next step; its end (`stopped`) arrives on the events. An agent
    credential only a turn it started itself (403 otherwise: copilot.check_own)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    run = copilot.stop(conversation, actor)
    return jsonify(run=run.id if run else None, stopping=run is not None)
