"""What the API shows: a card as its Prompt for this credential (approvals.prompt_for: its token,
who decided it), a message, a conversation, and a conversation's pending prompts."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from app import copilot
from app.copilot.approvals import Actor, Prompt, prompt_for
from app.extensions import db
from app.models import Approval, Conversation, Message, utcnow
from app.status import Role, Status


def prompt(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A card as the API shows it: the engine's Prompt for this credential (the action's words
    only; a token only while it may answer: approvals.prompt_for)."""
    return prompt_json(prompt_for(approval, actor))


def prompt_json(shown: Prompt) -> dict[str, Any]:
    """A Prompt as JSON (DESIGN §5): its words, its token, who decided it and who asked."""
    return {
        "id": shown.id,
        "type": shown.type,
        "action": shown.action,
        "reason": shown.text,
        "rows": [{"label": r.label, "value": r.value} for r in shown.rows],
        "form": shown.form,
        "status": shown.status,
        "token": shown.token,
        "expires_at": shown.expires_at.isoformat(),
        "outcome": shown.outcome if shown.final else None,
        "decided_by": shown.decided_by,
        "decided_at": shown.decided_at.isoformat() if shown.decided_at else None,
        "requested_by": shown.person,
        "requested_via": shown.requested_via,
        "requested_by_agent": shown.requested_by_agent,
        "edit": shown.edit,
        "replaces": shown.replaces,
        "edited": shown.edited,
        "changes": shown.changes,
    }


def message_json(message: Message) -> dict[str, Any]:
    if message.role == Role.CARD and message.approval is not None:
        return {"role": Role.CARD, "text": message.approval.reason, "approval": message.approval_id}
    return {"role": message.role, "text": message.text}


def pending_in(conversation_id: int, actor: Actor) -> list[dict[str, Any]]:
    """The conversation's pending cards and forms, as this credential may see them (one past its
    time is marked expired first, not listed with a token). One statement when none is due."""
    given = {"conversation_id": conversation_id, "now": utcnow()}
    rows = db.session.execute(_WAITING, given).all()
    if any(due for _, due in rows):
        copilot.expire_due(conversation_id)  # (then read again as they are now, not as loaded)
        rows = db.session.execute(_WAITING.execution_options(populate_existing=True), given).all()
    return [prompt(a, actor) for a, _ in rows if a.status == Status.PENDING]


_WAITING = (  # built once: every turn's end on an API stream reads it
    sa.select(Approval, Approval.expires_at <= sa.bindparam("now"))
    .where(
        Approval.conversation_id == sa.bindparam("conversation_id"),
        Approval.status.in_((Status.PENDING, Status.COUNTERSIGNING)),
    )
    .order_by(Approval.created_at)
)


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {"id": conversation.id, "title": conversation.title, "created_at": conversation.created_at.isoformat()}
