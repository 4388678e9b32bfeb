"""What the API shows: a card as a Prompt (with its token for this credential), who decided it, a
message, a conversation, and a conversation's pending prompts."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from app import copilot
from app.copilot.approvals import Actor, card_label, decided_by_line, may_answer, sign
from app.extensions import db
from app.models import Approval, Conversation, Message, utcnow
from app.status import ApprovalType, Role, Status


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
        "form": approval.form if approval.type == ApprovalType.FORM else None,
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
    from app.copilot.approvals import edit_form

    action = copilot.engine().registry.get(approval.action)
    editable = action is not None and approval.type == ApprovalType.CONFIRM and approval.status == Status.PENDING
    return {
        "edit": edit_form(action, approval) if editable and action is not None else None,
        "replaces": approval.replaces,
        "edited": approval.edited,
        "changes": approval.changes,
    }


def message_json(message: Message) -> dict[str, Any]:
    if message.role == Role.CARD and message.approval is not None:
        return {"role": Role.CARD, "text": message.approval.reason, "approval": message.approval_id}
    return {"role": message.role, "text": message.text}


def pending_in(conversation_id: int, actor: Actor) -> list[dict[str, Any]]:
    """The conversation's pending cards and forms, as this credential may see them (one past its
    time is marked expired first, not listed with a token). One statement when none is due."""
    waiting = sa.select(Approval, Approval.expires_at <= utcnow()).where(
        Approval.conversation_id == conversation_id, Approval.status.in_((Status.PENDING, Status.COUNTERSIGNING))
    )
    rows = db.session.execute(waiting.order_by(Approval.created_at)).all()
    if any(due for _, due in rows):
        copilot.expire_due(conversation_id)  # (then read again as they are now, not as loaded)
        rows = db.session.execute(waiting.order_by(Approval.created_at).execution_options(populate_existing=True)).all()
    return [prompt(a, actor) for a, _ in rows if a.status == Status.PENDING]


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {"id": conversation.id, "title": conversation.title, "created_at": conversation.created_at.isoformat()}
