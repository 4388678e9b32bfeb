"""Work an action handed to a queue (`delivery = Delivery.QUEUED`, the demo's send_email outbox):
its card ends `queued` with handle()'s commit; a job then runs the action's deliver(), and the card
moves once more, to `done` (Sent) or `failed` (Failed to send). The conversation gets a notice of
it, and the model reads it as news at its next turn (history.delivered)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from app.copilot.actions import ActionContext, registry
from app.copilot.approvals._machine import move, short
from app.copilot.approvals._outcomes import settled_line
from app.extensions import db
from app.models import Approval, Message
from app.status import Role, Status

log = logging.getLogger(__name__)
JOB = "app.copilot.approvals:deliver"  # (the front door queues it once handle() committed)
NOTICE = Role.NOTICE  # the message role a delivery's outcome is told with (the model reads it too)


def deliver(approval_id: str) -> str:
    """The job: run the action's deliver() as the card's person, and end the card with how it went."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.status != Status.QUEUED:
        return "nothing to deliver"
    action = registry().get(approval.action)
    if action is None:
        return settle(approval, Status.FAILED, "this action no longer exists")
    person = approval.user
    ctx = ActionContext(user=person, tenant=person.tenant, db=db.session, channel="system", approval_id=approval.id)
    try:
        said = action().deliver(ctx, action.Input.model_validate(approval.arguments))
    except ValidationError:
        return settle(approval, Status.FAILED, "its request is no longer valid")
    except Exception as exc:  # the queue's own refusal (an SMTP server saying no): Failed to send
        db.session.rollback()
        log.warning("delivery of %s failed", approval.id, exc_info=True)
        return settle(approval, Status.FAILED, short(exc))
    if said is None:  # nothing could take it yet (no mail server): it stays queued
        db.session.commit()
        return str(Status.QUEUED)
    return settle(approval, Status.DONE, str(said))


def settle(approval: Approval, status: Status, result: str) -> str:
    """Queued -> done or failed (only once, anywhere), still dated and signed as its person's
    decision, and in the same commit the conversation's notice of it (approvals.move tells the
    conversation's stream the card changed)."""
    # No approval_id: a message with one is the card itself, wherever the conversation is shown.
    db.session.add(Message(conversation_id=approval.conversation_id, role=NOTICE, text=settled_line(approval, status, result)))
    kept: dict[str, Any] = {"decided_at": approval.decided_at, "decided_by": approval.decided_by}
    if not move(approval, status, approval.user_id, "system", "delivery", source=Status.QUEUED, result=result, **kept):
        return "already settled"  # (move rolled the notice back with it)
    return str(status)
