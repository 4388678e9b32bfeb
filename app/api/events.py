"""A conversation's live events over the API, as Server-Sent Events of JSON."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from app import sse
from app.api.blueprint import bp, own_conversation
from app.api.shapes import message_json, pending_in
from app.auth import current_actor
from app.copilot import conversations
from app.copilot.approvals import Actor
from app.copilot.events import Event
from app.extensions import db
from app.models import Conversation
from app.status import EventType


@bp.get("/conversations/<id:conversation_id>/events")
def conversation_events(conversation_id: int) -> Any:
    """Server-Sent Events: `text` (the model's words as they come), `turn` (started, and its
    end: done, paused, failed, stopped, interrupted — with the pass's messages and the pending
    prompts), `approval` (a card's new status, whoever decided it: `{"id", "status"}`) and `title`
    (the conversation's new title, from its first message or a rename: `{"title"}`).
    Resume with Last-Event-ID (or ?after=)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    return sse.stream(conversation.id, actor.user.id, lambda event: event_json(event, actor, conversation.id))


_TITLE = sa.select(Conversation.title).where(Conversation.id == sa.bindparam("conversation_id"))  # (its title alone)


def event_json(event: Event, actor: Actor, conversation_id: int) -> tuple[str, str] | None:
    """An event as the API sends it: a turn's end carries its messages and the pending prompts, a
    title event the title (as the process that appended it knew them, when it is this one)."""
    data, known = dict(event.data), event.known or {}
    if event.type == EventType.TITLE:
        data["title"] = known["title"] if "title" in known else db.session.scalar(_TITLE, {"conversation_id": conversation_id})
    if event.type == EventType.TURN and "messages" in data:
        written = known.get("messages")
        if written is None:
            written = conversations.messages(conversation_id, data["messages"])
        data["messages"] = [message_json(m) for m in written]
        data["pending"] = pending_in(conversation_id, actor)
    return event.type, json.dumps(data)
