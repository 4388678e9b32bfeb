"""Who decided a card, and how, as the answer to a press on a card decided elsewhere says it:
"admin@example.com revoked this card at 19:02 UTC. Nothing ran." The web and the API show the
same sentence (it is the AlreadyDecided error's message), never "already answered" to a person
who never answered it."""

from __future__ import annotations

from datetime import datetime

from app.errors import AlreadyDecided
from app.extensions import db
from app.models import Approval, User, utcnow
from app.status import FORM_SUBMITTED, NO_ONE, OUTCOMES, TWO_SIGNATURES, ApprovalType, Status


def decided_words(approval: Approval, viewer_id: int) -> str:
    """The sentence for `viewer_id` (their own decision says "You already …": it may have been
    this page, another tab or another channel); a countersigned card names both signatures."""
    status = Status(approval.status)
    if status is Status.PENDING:
        return AlreadyDecided.message
    first = approval.confirmed_by  # the person's signature on a card that needed two
    decider = (first if status is Status.COUNTERSIGNING else approval.decided_by) or approval.user_id
    sentence, single = OUTCOMES[status].pressed, not first or first == decider
    if not single:
        for did, both in TWO_SIGNATURES.items():
            sentence = sentence.replace(did, both)
    if approval.type == ApprovalType.FORM and status is Status.DONE:
        sentence = sentence.replace(*FORM_SUBMITTED)
    mine = status not in NO_ONE and single and decider == viewer_id  # (here, in another tab or on another channel)
    who = "You already" if mine else _who(decider, viewer_id)
    said = sentence.format(who=who, first=_who(first, viewer_id) if first else "", at=_at(_when(approval, status)))
    return said.replace(" and You ", " and you ")


def already_decided(approval: Approval, viewer_id: int) -> AlreadyDecided:
    """The error for an answer to a card that is no longer waiting for this answer, read afresh."""
    db.session.refresh(approval)
    return AlreadyDecided(decided_words(approval, viewer_id))


def _who(user_id: int, viewer_id: int) -> str:
    if user_id == viewer_id:
        return "You"
    user = db.session.get(User, user_id)
    return user.email if user is not None else "someone"


def _when(approval: Approval, status: Status) -> datetime | None:
    if status is Status.COUNTERSIGNING:
        return approval.confirmed_at
    if status is Status.RUNNING:
        return approval.claimed_at
    return approval.decided_at or (approval.expires_at if status is Status.EXPIRED else None)


def _at(when: datetime | None) -> str:
    if when is None:
        return ""
    return f" at {when:%H:%M} UTC" if when.date() == utcnow().date() else f" at {when:%d %b %Y %H:%M} UTC"
