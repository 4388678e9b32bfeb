"""Cards over the API: a person's answers (confirm, decline, cancel, submit, edit, refresh), their
list, and the countersignature: the queue and the second signature."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import jsonify, request

from app import copilot
from app.api.blueprint import body, bp
from app.api.replies import turn_reply
from app.api.shapes import prompt
from app.auth import current_actor
from app.copilot import events
from app.copilot.approvals import Actor, prompt_for, waiting_for
from app.errors import BadValues
from app.extensions import db, limit_per_person_and_address
from app.models import Approval
from app.status import ANSWERED, REVISED, ApprovalType, Decision, Status


@bp.post(f"/approvals/<approval_id>/<any({', '.join(ANSWERED)}):decision>")
@limit_per_person_and_address("ANSWERS")
def answer(approval_id: str, decision: str) -> Any:
    """The card's final state (handle() has run when confirmed); the model's continuation is
    waited for as for a message, or follows on the events with `Prefer: respond-async`."""
    actor = current_actor("api")
    data = body()
    token = data.get("token")
    if not isinstance(token, str):
        raise BadValues("`token` must be a string.")
    values = data.get("values") if decision == Decision.SUBMIT else None
    if decision == Decision.SUBMIT and not isinstance(values, dict):
        raise BadValues("`values` must be an object of field names to values.")
    reason = data.get("reason") if decision == Decision.DECLINE else None
    approval = copilot.answer(approval_id, token, actor, decision, values, reason)
    # Read only after the answer (a bad token is refused before anything is looked up); the
    # continuation's end is after this cursor if copilot.wait still finds it going.
    cursor = events.last_id(approval.conversation_id)
    return turn_reply(
        approval.conversation_id,
        approval.run_id,
        [],
        lambda: copilot.card_message_id(approval),  # (read only when the continuation's lines are)
        cursor,
        actor,
        200,
        status=approval.status,
        result=approval.result if approval.type == ApprovalType.CONFIRM else None,
    )


@bp.get("/approvals")
def list_approvals() -> Any:
    """The person's own approvals with this status (pending by default), newest first."""
    actor = current_actor("api")
    status = request.args.get("status", Status.PENDING)
    copilot.expire_due(user_id=actor.user.id)  # one past its time is expired, not pending with a token
    rows = db.session.scalars(
        sa.select(Approval)
        .where(Approval.user_id == actor.user.id, Approval.status == status)
        .order_by(Approval.created_at.desc())
        .limit(200)
    )
    return jsonify(approvals=[prompt(a, actor) for a in rows])


def second_prompt(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A card waiting for this credential's countersignature: the action's words, who confirmed
    it, and its Prompt's countersignature token (none for an agent credential: it signs nothing)."""
    shown = prompt_for(approval, actor)
    return {
        "id": shown.id,
        "action": shown.action,
        "reason": shown.text,
        "rows": [{"label": r.label, "value": r.value} for r in shown.rows],
        "status": shown.status,
        "requested_by": shown.person,
        "confirmed_by": shown.confirmed_by,
        "countersign": shown.countersign,
        "token": shown.second_token,
        "expires_at": shown.expires_at.isoformat(),
    }


@bp.get("/countersign")
def countersign_queue() -> Any:
    """The cards of the tenant waiting for a countersignature this person may give (never their
    own), each with its countersignature token for this credential."""
    actor = current_actor("api")
    return jsonify(approvals=[second_prompt(a, actor) for a in waiting_for(actor.user, copilot.engine().registry)])


@bp.post("/approvals/<approval_id>/countersign", defaults={"decision": Decision.COUNTERSIGN}, endpoint="countersign")
@bp.post("/approvals/<approval_id>/countersign/decline", defaults={"decision": Decision.DECLINE}, endpoint="countersign_decline")
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
    shown = prompt_for(copilot.countersign(approval_id, token, actor, decision, data.get("reason")), actor)
    return jsonify(id=shown.id, status=shown.status, outcome=shown.outcome, decided_by=shown.decided_by or "")


@bp.post(f"/approvals/<approval_id>/<any({', '.join(REVISED)}):decision>")
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
    values = data.get("values") if decision == Decision.EDIT else None
    if decision == Decision.EDIT and not isinstance(values, dict):
        raise BadValues("`values` must be an object of field names to values.")
    fresh = copilot.answer(approval_id, token, actor, decision, values)
    return jsonify(status=fresh.status, replaces=approval_id, approval=prompt(fresh, actor)), 201
