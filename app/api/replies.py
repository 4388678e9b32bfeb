"""The reply to a POST that queued a pass (a message, a retry, an answer): at once or after waiting
for the turn, as RFC 7240 `Prefer` asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from flask import current_app, jsonify, request, url_for

from app import copilot
from app.api.shapes import message_json, pending_in
from app.copilot.approvals import Actor
from app.extensions import db
from app.models import Message


def preference() -> tuple[bool, float]:
    """RFC 7240 Prefer: (respond-async asked, seconds to wait at most: `wait=N`, never past
    TURN_WAIT)."""
    most = float(current_app.config["TURN_WAIT"])
    tokens = [t.strip().lower() for h in request.headers.getlist("Prefer") for t in h.split(",")]
    wait = most
    for token in tokens:
        name, _, value = token.partition("=")
        if name.strip() == "wait" and value.strip().isdigit():
            wait = min(most, float(value.strip()))
    return "respond-async" in tokens, wait


def events_url(conversation_id: int, after: str) -> str:
    return url_for("api.conversation_events", conversation_id=conversation_id, after=after)


def turn_reply(
    conversation_id: int,
    run_id: int | None,
    shown: list[Message],
    after_message: int | Callable[[], int],
    cursor: str,
    actor: Actor,
    async_status: int = 202,
    **extra: Any,
) -> Any:
    """After a POST that queued a pass: at once when asked (`respond-async`: 202, or 200 for an
    answer, whose card is decided already), else wait for it (bounded) and answer 200 with what
    is new, or 202 if it is still going. `after_message`: the message the pass's lines come after
    (or how to find it, asked only when they are read)."""
    asked_async, wait = preference()
    if run_id is not None and (asked_async or not copilot.wait(conversation_id, run_id, cursor, wait)):
        response = jsonify(run=run_id, events=events_url(conversation_id, cursor), **extra)
        if asked_async:
            response.headers["Preference-Applied"] = "respond-async"
        return response, async_status if asked_async else 202
    if run_id is not None:  # what the pass wrote (not another turn's lines written meanwhile)
        after_message = after_message() if callable(after_message) else after_message
        shown = [
            *shown,
            *db.session.scalars(
                sa.select(Message).where(Message.run_id == run_id, Message.id > after_message).order_by(Message.id)
            ),
        ]
    return jsonify(messages=[message_json(m) for m in shown], pending=pending_in(conversation_id, actor), **extra)
