"""The JSON API of DESIGN §5: conversations, messages and card answers."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, current_app, g, jsonify, request, url_for
from flask_login import current_user

from app import sse
from app.api.openapi import document
from app.auth import bearer_token, current_actor
from app.copilot import agent, conversations, events, runs
from app.copilot.countersigning import waiting_for
from app.copilot.events import Event
from app.copilot.outcomes import card_label, decided_by_line
from app.copilot.text import check_message
from app.copilot.tokens import Actor, may_answer, sign, sign_second
from app.errors import BadValues
from app.extensions import csrf, db, limit_per_person_and_address
from app.json_body import json_object
from app.models import Approval, Conversation, Message, User, utcnow
from app.status import Status

bp = Blueprint("api", __name__)
csrf.exempt(bp)


@bp.before_request
def authenticate() -> None:
    """Bearer token, or the browser session with its CSRF header on every write."""
    if request.endpoint == "api.openapi":
        return
    g.api_token = bearer_token()
    if g.api_token is None:
        if not current_user.is_authenticated:
            abort(401)
        if request.method not in ("GET", "HEAD", "OPTIONS"):  # POST, PATCH, DELETE
            csrf.protect()


def body() -> dict[str, Any]:
    """The JSON object sent; a 400 naming what is wrong otherwise (app.json_body)."""
    return json_object()


def prompt(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A pending card as the API shows it: the action's words only, and a token — none for an
    agent credential (it never answers), nor for a card outside the credential's toolsets."""
    # While it waits for its countersignature, its person may still decline it.
    pending = approval.status in (Status.PENDING, Status.COUNTERSIGNING) and may_answer(actor, approval)
    return {
        "id": approval.id,
        "type": approval.type,
        "action": approval.action,
        "reason": approval.reason,
        "rows": [{"label": r["label"], "value": r["value"]} for r in approval.rows],
        "form": approval.form if approval.type == "form" else None,
        "status": approval.status,
        "token": sign(approval, actor.binding) if pending else None,
        "expires_at": approval.expires_at.isoformat(),
        **decided(approval, actor),
        **revisions(approval),
    }


def decided(approval: Approval, actor: Actor) -> dict[str, Any]:
    """Who decided a card and when (null while it waits), its outcome label, and who asked for it."""
    final = Status(approval.status).final
    return {
        "outcome": card_label(approval) if final else None,
        "decided_by": decided_by_line(approval, actor.user.id) or None,
        "decided_at": approval.decided_at.isoformat() if final and approval.decided_at else None,
        "requested_by": approval.user.email,
        "requested_via": approval.requested_via or None,
        "requested_by_agent": approval.requested_by_agent,
    }


def revisions(approval: Approval) -> dict[str, Any]:
    """A card's second-signature fields: its Edit form (the action's `editable` fields, an
    elicitation like a form's; null when it edits nothing), the card it replaces and the names of
    the fields the person edited, and on a changed card the rows that differ."""
    from app.copilot.revise import edit_form

    action = agent.engine().registry.get(approval.action)
    editable = action is not None and approval.type == "confirm" and approval.status == Status.PENDING
    return {
        "edit": edit_form(action, approval) if editable and action is not None else None,
        "replaces": approval.replaces,
        "edited": approval.edited,
        "changes": approval.changes,
    }


def message_json(message: Message) -> dict[str, Any]:
    if message.role == "card" and message.approval is not None:
        return {"role": "card", "text": message.approval.reason, "approval": message.approval_id}
    return {"role": message.role, "text": message.text}


def pending_in(conversation_id: int, actor: Actor) -> list[dict[str, Any]]:
    """The conversation's pending cards and forms, as this credential may see them (one past its
    time is marked expired first, not listed with a token). One statement when none is due."""
    waiting = sa.select(Approval, Approval.expires_at <= utcnow()).where(
        Approval.conversation_id == conversation_id, Approval.status.in_((Status.PENDING, Status.COUNTERSIGNING))
    )
    rows = db.session.execute(waiting.order_by(Approval.created_at)).all()
    if any(due for _, due in rows):
        agent.expire_due(conversation_id)  # (then read again as they are now, not as loaded)
        rows = db.session.execute(waiting.order_by(Approval.created_at).execution_options(populate_existing=True)).all()
    return [prompt(a, actor) for a, _ in rows if a.status == Status.PENDING]


def own_conversation(conversation_id: int, actor: Actor) -> Conversation:
    """The person's own live conversation; 404 for anyone else's, another tenant's, a deleted one."""
    return conversations.own(conversation_id, actor.user)


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {"id": conversation.id, "title": conversation.title, "created_at": conversation.created_at.isoformat()}


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
    agent.expire_due(conversation.id)
    runs.sweep_dead(current_app.config["TURN_DEAD_AFTER"], conversation.id)
    messages = db.session.scalars(sa.select(Message).where(Message.conversation_id == conversation.id).order_by(Message.id))
    return jsonify(
        id=conversation.id,
        title=conversation.title,
        messages=[message_json(m) for m in messages],
        pending=pending_in(conversation.id, actor),
    )


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
    after_message: int,
    cursor: str,
    actor: Actor,
    async_status: int = 202,
    **extra: Any,
) -> Any:
    """After a POST that queued a pass: at once when asked (`respond-async`: 202, or 200 for an
    answer, whose card is decided already), else wait for it (bounded) and answer 200 with what
    is new, or 202 if it is still going."""
    asked_async, wait = preference()
    if run_id is not None and (asked_async or not runs.wait(conversation_id, run_id, cursor, wait)):
        response = jsonify(run=run_id, events=events_url(conversation_id, cursor), **extra)
        if asked_async:
            response.headers["Preference-Applied"] = "respond-async"
        return response, async_status if asked_async else 202
    if run_id is not None:  # what the pass wrote (not another turn's lines written meanwhile)
        shown = [
            *shown,
            *db.session.scalars(
                sa.select(Message).where(Message.run_id == run_id, Message.id > after_message).order_by(Message.id)
            ),
        ]
    return jsonify(messages=[message_json(m) for m in shown], pending=pending_in(conversation_id, actor), **extra)


@bp.post("/conversations/<id:conversation_id>/messages")
@limit_per_person_and_address("MESSAGES")
def post_message(conversation_id: int) -> Any:
    """Say something; the turn is queued and waited for as `Prefer` says (DESIGN §5)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    text = body().get("text")
    if not isinstance(text, str) or not text.strip():
        raise BadValues("`text` must be a non-empty string.")
    text = check_message(text, current_app.config["MESSAGE_MAX_CHARS"])  # whole, or a 4xx: never cut
    cursor = events.last_id(conversation.id)
    said, run = agent.send_message(conversation, actor, text)
    return turn_reply(conversation.id, run.id, [said], said.id, cursor, actor)


@bp.post("/conversations/<id:conversation_id>/retry")
@limit_per_person_and_address("MESSAGES")  # a retry runs a turn, as a message does
def retry(conversation_id: int) -> Any:
    """Run the last pass again after it failed or was interrupted (a second press queues nothing);
    an agent credential only a turn it started itself (403 otherwise: runs.check_own)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    cursor = events.last_id(conversation.id)
    before = runs.newest_message_id(conversation.id)
    run = runs.retry(conversation, actor)
    return turn_reply(conversation.id, run.id if run else None, [], before, cursor, actor)


@bp.post("/conversations/<id:conversation_id>/stop")
def stop(conversation_id: int) -> Any:
    """End the running turn at its next step; its end (`stopped`) arrives on the events. An agent
    credential only a turn it started itself (403 otherwise: runs.check_own)."""
    actor = current_actor("api")
    conversation = own_conversation(conversation_id, actor)
    run = runs.stop(conversation, actor)
    return jsonify(run=run.id if run else None, stopping=run is not None)


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


def event_json(event: Event, actor: Actor, conversation_id: int) -> tuple[str, str] | None:
    """An event as the API sends it: a turn's end carries its messages and the pending prompts, a
    title event the title."""
    data = dict(event.data)
    if event.type == "title":
        conversation = db.session.get(Conversation, conversation_id)
        data["title"] = conversation.title if conversation is not None else None
    if event.type == "turn" and "messages" in data:
        shown = db.session.scalars(sa.select(Message).where(Message.id.in_(data["messages"])).order_by(Message.id))
        data["messages"] = [message_json(m) for m in shown]
        data["pending"] = pending_in(conversation_id, actor)
    return event.type, json.dumps(data)


@bp.post("/approvals/<approval_id>/<any(confirm, decline, cancel, submit):decision>")
@limit_per_person_and_address("ANSWERS")
def answer(approval_id: str, decision: str) -> Any:
    """The card's final state (handle() has run when confirmed); the model's continuation is
    waited for as for a message, or follows on the events with `Prefer: respond-async`."""
    actor = current_actor("api")
    data = body()
    token = data.get("token")
    if not isinstance(token, str):
        raise BadValues("`token` must be a string.")
    values = data.get("values") if decision == "submit" else None
    if decision == "submit" and not isinstance(values, dict):
        raise BadValues("`values` must be an object of field names to values.")
    reason = data.get("reason") if decision == "decline" else None
    approval = agent.answer(approval_id, token, actor, decision, values, reason)
    # Read only after the answer (a bad token is refused before anything is looked up); the
    # continuation's end is after this cursor if runs.wait still finds it going.
    cursor = events.last_id(approval.conversation_id)
    return turn_reply(
        approval.conversation_id,
        approval.run_id,
        [],
        runs.card_message_id(approval),
        cursor,
        actor,
        200,
        status=approval.status,
        result=approval.result if approval.type == "confirm" else None,
    )


@bp.get("/approvals")
def list_approvals() -> Any:
    """The person's own approvals with this status (pending by default), newest first."""
    actor = current_actor("api")
    status = request.args.get("status", Status.PENDING)
    agent.expire_due(user_id=actor.user.id)  # one past its time is expired, not pending with a token
    rows = db.session.scalars(
        sa.select(Approval)
        .where(Approval.user_id == actor.user.id, Approval.status == status)
        .order_by(Approval.created_at.desc())
        .limit(200)
    )
    return jsonify(approvals=[prompt(a, actor) for a in rows])


def second_prompt(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A card waiting for this credential's countersignature: the action's words, who confirmed
    it, and the countersignature token (none for an agent credential: it signs nothing)."""
    confirmer = db.session.get(User, approval.confirmed_by) if approval.confirmed_by else None
    return {
        "id": approval.id,
        "action": approval.action,
        "reason": approval.reason,
        "rows": [{"label": r["label"], "value": r["value"]} for r in approval.rows],
        "status": approval.status,
        "requested_by": approval.user.email,
        "confirmed_by": confirmer.email if confirmer else None,
        "countersign": approval.countersign,
        "token": sign_second(approval.id, actor.user, actor.binding) if may_answer(actor, approval) else None,
        "expires_at": approval.expires_at.isoformat(),
    }


@bp.get("/countersign")
def countersign_queue() -> Any:
    """The cards of the tenant waiting for a countersignature this person may give (never their
    own), each with its countersignature token for this credential."""
    actor = current_actor("api")
    return jsonify(approvals=[second_prompt(a, actor) for a in waiting_for(actor.user, agent.engine().registry)])


@bp.post("/approvals/<approval_id>/countersign", defaults={"decision": "countersign"}, endpoint="countersign")
@bp.post("/approvals/<approval_id>/countersign/decline", defaults={"decision": "decline"}, endpoint="countersign_decline")
@limit_per_person_and_address("ANSWERS")
def countersign(approval_id: str, decision: str) -> Any:
    """The second signature (or a decline, with an optional `reason`), with the countersignature
    token from GET /api/countersign: by a person's own session or client-scope token, never an
    agent's. The card's final state and its outcome line; what handle() said stays with the
    person who asked, in their conversation."""
    actor = current_actor("api")
    data = body()
    token = data.get("token")
    if not isinstance(token, str):
        raise BadValues("`token` must be a string.")
    approval = agent.countersign(approval_id, token, actor, decision, data.get("reason"))
    by = decided_by_line(approval, actor.user.id)
    return jsonify(id=approval.id, status=approval.status, outcome=card_label(approval), decided_by=by)


@bp.post("/approvals/<approval_id>/<any(edit, refresh):decision>")
@limit_per_person_and_address("ANSWERS")
def revise(approval_id: str, decision: str) -> Any:
    """Edit a pending card (`values`: the edited fields), or ask a changed card afresh: 201 with
    the fresh card (a Prompt, with its token), which the person then confirms. The old card ends
    `edited` (an edit) or stays `changed` (a refresh)."""
    actor = current_actor("api")
    data = body()
    token = data.get("token")
    if not isinstance(token, str):
        raise BadValues("`token` must be a string.")
    values = data.get("values") if decision == "edit" else None
    if decision == "edit" and not isinstance(values, dict):
        raise BadValues("`values` must be an object of field names to values.")
    fresh = agent.answer(approval_id, token, actor, decision, values)
    return jsonify(status=fresh.status, replaces=approval_id, approval=prompt(fresh, actor)), 201
