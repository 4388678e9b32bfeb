"""The JSON API of DESIGN §5: conversations, messages and card answers."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, current_app, g, jsonify, request
from flask_login import current_user

from app.api.openapi import document
from app.auth import bearer_token, current_actor
from app.copilot import agent, approvals
from app.copilot.approvals import Actor
from app.copilot.text import check_message
from app.errors import BadValues, NotFound
from app.extensions import csrf, db, limit_per_person_and_address
from app.json_body import json_object
from app.models import Approval, Conversation, Message

bp = Blueprint("api", __name__)
csrf.exempt(bp)


@bp.before_request
def authenticate() -> None:
    """Bearer token, or the browser session with its CSRF header on every POST."""
    if request.endpoint == "api.openapi":
        return
    g.api_token = bearer_token()
    if g.api_token is None:
        if not current_user.is_authenticated:
            abort(401)
        if request.method == "POST":
            csrf.protect()


def body() -> dict[str, Any]:
    """The JSON object sent; a 400 naming what is wrong otherwise (app.json_body)."""
    return json_object()


def prompt(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A pending card as the API shows it: the action's words only, and a token — none for an
    agent credential (it never answers), nor for a card outside the credential's toolsets."""
    pending = approval.status == "pending" and approvals.may_answer(actor, approval)
    return {
        "id": approval.id,
        "type": approval.type,
        "action": approval.action,
        "reason": approval.reason,
        "rows": [{"label": r["label"], "value": r["value"]} for r in approval.rows],
        "form": approval.form if approval.type == "form" else None,
        "status": approval.status,
        "token": approvals.sign(approval, actor.binding) if pending else None,
        "expires_at": approval.expires_at.isoformat(),
    }


def message_json(message: Message) -> dict[str, Any]:
    if message.role == "card" and message.approval is not None:
        return {"role": "card", "text": message.approval.reason, "approval": message.approval_id}
    return {"role": message.role, "text": message.text}


def pending_in(conversation_id: int, actor: Actor) -> list[dict[str, Any]]:
    rows = db.session.scalars(
        sa.select(Approval).where(Approval.conversation_id == conversation_id,
                                  Approval.status == "pending").order_by(Approval.created_at)
    )
    return [prompt(a, actor) for a in rows]


def own_conversation(conversation_id: int, actor: Actor) -> Conversation:
    conversation = db.session.get(Conversation, conversation_id)
    if conversation is None or conversation.user_id != actor.user.id:
        raise NotFound()
    return conversation


@bp.get("/openapi.json")
def openapi() -> Any:
    return jsonify(document())


@bp.post("/conversations")
def create_conversation() -> Any:
    actor = current_actor("api")
    conversation = Conversation(tenant_id=actor.user.tenant_id, user_id=actor.user.id)
    db.session.add(conversation)
    db.session.commit()
    return jsonify(id=conversation.id), 201


@bp.get("/conversations/<id:conversation_id>")
def get_conversation(conversation_id: int) -> Any:
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    agent.expire_due(conversation.id)
    messages = db.session.scalars(
        sa.select(Message).where(Message.conversation_id == conversation.id).order_by(Message.id)
    )
    return jsonify(id=conversation.id, title=conversation.title,
                   messages=[message_json(m) for m in messages],
                   pending=pending_in(conversation.id, actor))


@bp.post("/conversations/<id:conversation_id>/messages")
@limit_per_person_and_address("MESSAGES")
def post_message(conversation_id: int) -> Any:
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    text = body().get("text")
    if not isinstance(text, str) or not text.strip():
        raise BadValues("`text` must be a non-empty string.")
    text = check_message(text, current_app.config["MESSAGE_MAX_CHARS"])  # whole, or a 4xx: never cut
    added = agent.send_message(conversation, actor.user, text, channel=actor.channel, actor=actor)
    return jsonify(messages=[message_json(m) for m in added],
                   pending=pending_in(conversation.id, actor))


@bp.post("/conversations/<id:conversation_id>/retry")
@limit_per_person_and_address("MESSAGES")  # a retry runs a turn, as a message does
def retry(conversation_id: int) -> Any:
    """Run the last turn again after the model failed."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    added = agent.retry(conversation, actor.user, channel=actor.channel, actor=actor)
    return jsonify(messages=[message_json(m) for m in added], pending=pending_in(conversation.id, actor))


@bp.post("/approvals/<approval_id>/<any(confirm, decline, cancel, submit):decision>")
@limit_per_person_and_address("ANSWERS")
def answer(approval_id: str, decision: str) -> Any:
    actor = current_actor("api")
    data = body()
    token = data.get("token")
    if not isinstance(token, str):
        raise BadValues("`token` must be a string.")
    if decision == "submit":
        values = data.get("values")
        if not isinstance(values, dict):
            raise BadValues("`values` must be an object of field names to values.")
        approval, added = agent.answer_form(approval_id, token, actor, values)
    else:
        approval, added = agent.answer(approval_id, token, actor, decision)
    return jsonify(status=approval.status, messages=[message_json(m) for m in added],
                   pending=pending_in(approval.conversation_id, actor))


@bp.get("/approvals")
def list_approvals() -> Any:
    actor = current_actor("api")
    status = request.args.get("status", "pending")
    rows = db.session.scalars(
        sa.select(Approval).where(Approval.user_id == actor.user.id, Approval.status == status)
        .order_by(Approval.created_at.desc()).limit(200)
    )
    return jsonify(approvals=[prompt(a, actor) for a in rows])
