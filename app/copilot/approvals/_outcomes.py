"""What a decided card says on every channel, for whoever reads it: the action's own words (its
done label, how its work ends) looked up once, every line read from app/status.py's one table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.copilot.actions import registry
from app.extensions import db
from app.models import Approval, User
from app.status import ApprovalType, Status, Words, card_line, chat_line, decided_line, model_line


def words_of(approval: Approval) -> Words:
    """The action's own words for its outcomes (the defaults when it is gone)."""
    action = registry().get(approval.action)
    if action is None:
        return Words()
    return Words(action.done_label or action.kind.done_label, action.delivery)


def card_label(approval: Approval) -> str:
    """The card's outcome label; its status stands beside it as a badge."""
    return card_line(approval, words_of(approval))


def chat_outcome(approval: Approval) -> str:
    """The line a chat thread is told once its card is decided, and who decided it, when."""
    by = decided_by_line(approval)
    return f"{chat_line(approval, words_of(approval))} ({by})" if by else chat_line(approval, words_of(approval))


@dataclass
class _Settled:
    status: str
    type: str
    result: str | None
    filled: list[str] | None


def settled_line(approval: Approval, status: Status, result: str) -> str:
    """What the conversation is told when a queued card's delivery ends as `status` with `result`
    (said before the card is moved, so both are kept in one commit): "Sent: Email to … sent."."""
    row, words = _Settled(status, approval.type, result, approval.filled), words_of(approval)
    label, line = card_line(row, words), chat_line(row, words)
    return line if line.startswith(label) else f"{label}: {line}"


def model_outcome(approval: Approval) -> str:
    """The line the model reads for a decided card (before revise.told adds the person's words)."""
    return model_line(approval, words_of(approval))


def when(moment: datetime | None) -> str:
    """A decision's time as every channel prints it."""
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment is not None else "at an unknown time"


def decided_by_line(approval: Approval, viewer_id: int | None = None) -> str:
    """Who decided the card and when, for the person reading it (`viewer_id`; by default the card's
    own person): "Declined by you, …", "Revoked by admin@…, …", "Ended by the expiry, …",
    "Confirmed by you; countersigned by …, …". Empty while it is undecided."""
    status = Status(approval.status)
    if not status.final:
        return ""
    viewer = approval.user_id if viewer_id is None else viewer_id

    def name(user_id: int | None) -> str:
        if user_id is None:
            return "nobody"
        if user_id == viewer:
            return "you"
        user = db.session.get(User, user_id)
        return user.email if user is not None else f"a former user ({user_id})"

    decider = approval.decided_by if approval.decided_by is not None else approval.user_id
    second = approval.confirmed_by is not None and approval.decided_by != approval.confirmed_by
    confirmer = name(approval.confirmed_by) if second else None
    # The moment of the decision: the press that claimed it (not when its work or a sweep ended),
    # or for an expired card the end of its time.
    moment = approval.expires_at if status is Status.EXPIRED else (approval.claimed_at or approval.decided_at)
    return decided_line(status, name(decider), when(moment), confirmer, form=approval.type == ApprovalType.FORM)
