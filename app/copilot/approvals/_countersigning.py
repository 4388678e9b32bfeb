"""The two-person rule (an action's `countersign`): the person's confirm is the first signature
(pending -> countersigning, nothing runs); a second, different person of the tenant whom the rule
allows gives the second, and only then does the card run, through approvals, as the person who asked."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from app.copilot.actions import ActionContext, Registry
from app.copilot.approvals._decided import already_decided, decided_words
from app.copilot.approvals._decline import decline
from app.copilot.approvals._handle import confirmed
from app.copilot.approvals._machine import claim, expire, move
from app.copilot.approvals._tokens import Actor, ChannelProof, refuse, verify_second
from app.errors import AlreadyDecided, BadValues, Expired, NeedsSecondSignature, WrongPerson
from app.extensions import db
from app.models import Approval, User, utcnow
from app.status import Decision, Refusal, Status

log = logging.getLogger(__name__)


def first_signature(approval: Approval, proof: str | ChannelProof, actor: Actor) -> Approval:
    """The person confirms a card that needs a countersignature: pending -> countersigning
    (conditionally, within its time), their signature recorded and audited; nothing runs yet. A
    chat reply gives no signature here: the person signs on the web card (or with a client token)."""
    if isinstance(proof, ChannelProof):
        raise refuse(NeedsSecondSignature(), Refusal.COUNTERSIGNED_CARD_BY_CHANNEL, actor, approval, approval.id)
    now = utcnow()
    when = [Approval.expires_at > now]
    if not move(
        approval, Status.COUNTERSIGNING, actor.user.id, actor.channel, when=when, confirmed_by=actor.user.id, confirmed_at=now
    ):
        raise refuse(already_decided(approval, actor.user.id), Refusal.LOST_CLAIM, actor, approval, approval.id)
    return approval


def countersign(
    approval_id: str, token: object, actor: Actor, decision: str, registry: Registry, reason: object = None
) -> Approval:
    """The second signature: 'countersign' or 'decline', by a different person of the tenant whom
    the action's rule allows, with their own countersignature token (tokens.verify_second). A
    countersign claims countersigning -> running (only one caller anywhere wins), then authorizes
    again, rebuilds and compares the card, and runs handle() once, all AS THE PERSON WHO ASKED;
    the countersigner is recorded as `decided_by`, the person as `confirmed_by`."""
    approval = verify_second(approval_id, token, actor)
    if not approval.countersign:
        raise refuse(
            BadValues("This card needs no countersignature."), Refusal.COUNTERSIGN_NOT_NEEDED, actor, approval, approval.id
        )
    if approval.status == Status.COUNTERSIGNING and approval.expires_at <= utcnow():
        expire(approval, channel=actor.channel)
    if approval.status == Status.EXPIRED:
        raise refuse(Expired(), Refusal.COUNTERSIGN_EXPIRED, actor, approval, approval.id)
    if approval.status != Status.COUNTERSIGNING:
        pending = approval.status == Status.PENDING
        why = Refusal.COUNTERSIGN_NOT_CONFIRMED if pending else Refusal.countersign_already(approval.status)
        raise refuse(AlreadyDecided(_not_waiting(approval, actor)), why, actor, approval, approval.id)
    if not may_countersign(approval, actor.user, registry):
        who = f"Only {approval.countersign} of this tenant may countersign this."
        raise refuse(WrongPerson(who), Refusal.COUNTERSIGN_NOT_ALLOWED, actor, approval, approval.id)
    if decision == Decision.DECLINE:
        return decline(approval, actor, reason, by_second_signer=True)
    claim(approval, Status.RUNNING, actor, source=Status.COUNTERSIGNING)
    return confirmed(approval, actor, registry, as_person=_requester(approval, actor))


def _not_waiting(approval: Approval, actor: Actor) -> str:
    if approval.status == Status.PENDING:
        return "Its person has not confirmed this card yet: there is nothing to countersign."
    return decided_words(approval, actor.user.id)


def _requester(approval: Approval, signer: Actor) -> Actor:
    """The person who asked, as the countersigned card runs: their user and tenant, the signer's channel."""
    return Actor(user=approval.user, binding="countersigned", channel=signer.channel)


def may_countersign(approval: Approval, user: User, registry: Registry) -> bool:
    """Whether this person may give this card's second signature: someone of its tenant other
    than the person who asked, whom the action's rule (the one the card was made with) allows,
    asked as the person who asked would run it. A rule that fails says no."""
    action = registry.get(approval.action)
    if action is None or not approval.countersign or user.tenant_id != approval.tenant_id:
        return False
    if user.id in (approval.user_id, approval.confirmed_by):
        return False
    asker = approval.user
    ctx = ActionContext(user=asker, tenant=asker.tenant, db=db.session, channel="web", approval_id=approval.id)
    try:
        input = action.Input.model_validate(approval.arguments)
        rule = action.countersigner(input)
        return rule is not None and rule.label == approval.countersign and bool(rule.allows(user, ctx, input))
    except Exception:  # the rule's own failure: nobody is allowed by it
        log.exception("the countersign rule of %s failed for approval %s", approval.action, approval.id)
        return False


def waiting_for(user: User, registry: Registry, limit: int = 200) -> list[Approval]:
    """Cards of the person's tenant that wait for a countersignature this person may give
    (never their own), oldest first: the one that expires first is on top."""
    query = sa.select(Approval).where(
        Approval.tenant_id == user.tenant_id,
        Approval.status == Status.COUNTERSIGNING,
        Approval.user_id != user.id,
        Approval.expires_at > utcnow(),
    )
    rows = db.session.scalars(query.order_by(Approval.expires_at).limit(limit))
    return [a for a in rows if may_countersign(a, user, registry)]
