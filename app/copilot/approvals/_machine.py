"""Approvals: create a card or a form, and decide it — verify, claim, authorize again, rebuild
and compare, and only then handle(). The one path to an approval's handle() (DESIGN §4).

Tokens and who may answer are in tokens.py, the card's text in cards.py, the form's schema and
validation in forms.py, the second signature in countersigning.py (it ends here too), how many may
wait in caps.py; every status word in app/status.py."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ValidationError

from app.copilot import audit, events
from app.copilot.actions import Action, ActionContext, Registry
from app.copilot.approvals import _revise as revise
from app.copilot.approvals._caps import check_cap
from app.copilot.approvals._cards import Card, build_card
from app.copilot.approvals._decided import already_decided
from app.copilot.approvals._forms import form_for, validate_form
from app.copilot.approvals._tokens import Actor, ChannelProof, asked_by, refuse, ttl, verify
from app.errors import (
    AgentCannotAnswer,
    BadValues,
    CountersignError,
    Expired,
    FormNeedsCard,
    NotFound,
    PartlyDone,
    WrongPerson,
)
from app.extensions import commit_kept, db, won
from app.models import Approval, Run, User, utcnow
from app.status import Delivery, Status

log = logging.getLogger(__name__)

# What each answer may be given to (None: either kind) and the status its claim moves to.
ANSWERS = {
    "confirm": ("confirm", Status.RUNNING),
    "cancel": ("form", Status.CANCELLED),
    "submit": ("form", Status.RUNNING),
}  # and revise.ANSWERS: decline (with the person's reason), edit, refresh
WAITING = (Status.PENDING, Status.COUNTERSIGNING)  # still waiting for a signature: its person's, or a second one


def _new(ctx: ActionContext, run: Run, action: type[Action], **fields: Any) -> Approval:
    now = utcnow()
    approval = Approval(
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        run_id=run.id,
        conversation_id=run.conversation_id,
        action=action.name,
        status=Status.PENDING,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl()),
        **{**asked_by(run, ctx.channel), **fields},
    )
    db.session.add(approval)
    db.session.flush()
    audit.record(
        "approval.created",
        Status.PENDING,
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        approval_id=approval.id,
        detail=f"{action.name} ({approval.type})",
        channel=ctx.channel,
    )
    return approval


def create(ctx: ActionContext, run: Run, action: type[Action], input: BaseModel, *, tool_call_id: str, step: int) -> Approval:
    """A pending card for this call. Raises TooManyPending past the run's cap and
    NotFound when the card names a record outside the person's tenant."""
    check_cap(ctx, run, action)
    fields = card_fields(action, input, build_card(action, ctx, input))
    return _new(ctx, run, action, tool_call_id=tool_call_id, step=step, type="confirm", **fields)


def card_fields(action: type[Action], input: BaseModel, card: Card) -> dict[str, Any]:
    """What a card stores of its call: every card, a fresh one too (revise.py), remembers who must
    give the second signature when the action's two-person rule names someone for this input."""
    fields = {"arguments": input.model_dump(mode="json"), "reason": card.reason, "rows": card.rows, "digest": card.digest}
    rule = action.countersigner(input)
    if rule is not None:
        fields["countersign"] = rule.label
    return fields


def create_form(
    ctx: ActionContext, run: Run, action: type[Action], given: dict[str, Any], *, tool_call_id: str, step: int
) -> Approval:
    """A pending form for a READ/WRITE call that left fields out; the model's values pre-fill it.
    FormNeedsCard when the call, or every choice the form could offer, needs a card."""
    check_cap(ctx, run, action)
    given, form = form_for(action, ctx, given)
    digest = hashlib.sha256(json.dumps(form, sort_keys=True, default=str).encode()).hexdigest()
    fields = {"arguments": given, "reason": form["message"], "rows": [], "digest": digest, "form": form}
    return _new(ctx, run, action, tool_call_id=tool_call_id, step=step, type="form", **fields)


def answer(
    approval_id: str,
    proof: str | ChannelProof,
    actor: Actor,
    decision: str,
    registry: Registry,
    values: Mapping[str, Any] | None = None,
) -> Approval:
    """The one entry for every answer on every channel: 'confirm' (a card), 'decline' (either),
    'cancel' (a form: Not now), 'submit' (a form, with `values`); 'edit', 'refresh' and a
    decline's reason in `values` are revise.answer's. `proof` is the card's token, or
    the channel's own proof of the sender. Returns the approval in its final state, or raises a
    CountersignError having changed nothing but the audit log."""
    approval = verify(approval_id, proof, actor)
    if decision in revise.ANSWERS:
        return revise.answer(approval, actor, decision, registry, values or {})
    only_for, target = ANSWERS[decision]
    if only_for is not None and approval.type != only_for:
        if decision == "submit":
            raise BadValues("This card has no form: confirm or decline it.")
        raise BadValues(f"This {approval.type} cannot be answered with {decision}.")
    _open(approval, actor)
    if decision == "submit":
        return _submit(approval, actor, registry, values or {})
    if decision == "confirm" and approval.countersign:  # the first of two signatures: nothing runs yet
        from app.copilot.approvals._countersigning import first_signature

        return first_signature(approval, proof, actor)
    _claim(approval, target, actor)
    return _confirmed(approval, actor, registry) if target is Status.RUNNING else approval


def _open(approval: Approval, actor: Actor, withdrawing: bool = False) -> None:
    """Raise Expired or AlreadyDecided (audited) unless the approval can still be answered (its
    person may still decline one that waits for its countersignature: `withdrawing`)."""
    if approval.status in WAITING and approval.expires_at <= utcnow():
        expire(approval, channel=actor.channel)
    if approval.status == Status.EXPIRED:
        raise refuse(Expired(), "expired", actor, approval, approval.id)
    if approval.status != Status.PENDING and not (withdrawing and approval.status == Status.COUNTERSIGNING):
        raise refuse(already_decided(approval, actor.user.id), f"already_{approval.status}", actor, approval, approval.id)


def _claim(
    approval: Approval, status: Status, actor: Actor, detail: str = "", *, source: Status = Status.PENDING, **values: Any
) -> None:
    """Move source -> status atomically (only one caller anywhere wins); AlreadyDecided else."""
    now = utcnow()
    stamps = {"claimed_at": now, "decided_by": actor.user.id, **values}
    when = [Approval.expires_at > now]
    if not move(approval, status, actor.user.id, actor.channel, detail, source=source, when=when, **stamps):
        raise refuse(already_decided(approval, actor.user.id), "lost_claim", actor, approval, approval.id)


def _context(actor: Actor, approval: Approval) -> ActionContext:
    return ActionContext(user=actor.user, tenant=actor.user.tenant, db=db.session, channel=actor.channel, approval_id=approval.id)


def _authorized(action: type[Action], ctx: ActionContext, input: BaseModel) -> bool:
    try:
        return bool(action().authorize(ctx, input))
    except (CountersignError, PermissionError):
        return False


def _confirmed(approval: Approval, actor: Actor, registry: Registry, as_person: Actor | None = None) -> Approval:
    """A claimed card: authorize again, rebuild and compare, then handle() once, as the person
    (`as_person`: the person who asked, when `actor` gave the second signature)."""
    action = registry.get(approval.action)
    if action is None:
        return _finish(approval, Status.FAILED, actor, result="this action no longer exists")
    ctx = _context(as_person or actor, approval)
    try:
        input = action.Input.model_validate(approval.arguments)
    except ValidationError:
        return _finish(approval, Status.REFUSED, actor)
    if not _authorized(action, ctx, input):
        return _finish(approval, Status.REFUSED, actor)
    try:
        card = build_card(action, ctx, input)
    except CountersignError:
        return _finish(approval, Status.CHANGED, actor, result="the record is gone")
    if card.digest != approval.digest:
        return revise.changed(approval, actor, card)
    return _handle(approval, actor, action, ctx, input)


def _submit(approval: Approval, actor: Actor, registry: Registry, values: Mapping[str, Any]) -> Approval:
    """A form: validate (WTForms, then Input) before any claim, then authorize again and handle()
    with the person's values over the model's. The values are never stored; their names are."""
    action = registry.get(approval.action)
    if action is None or approval.form is None:
        raise BadValues("This action no longer exists.")
    input, filled = validate_form(approval.form["requestedSchema"], action, approval.arguments, values)
    if action.needs_card(input):  # whatever field made it so, on any channel: a form never gives a card
        raise refuse(FormNeedsCard(), "form_needs_card", actor, approval, approval.id)
    _claim(approval, Status.RUNNING, actor)
    ctx = _context(actor, approval)
    if not _authorized(action, ctx, input):
        return _finish(approval, Status.REFUSED, actor, filled=filled)
    return _handle(approval, actor, action, ctx, input, filled)


def _handle(
    approval: Approval, actor: Actor, action: type[Action], ctx: ActionContext, input: BaseModel, filled: list[str] | None = None
) -> Approval:
    """The one place an approval's handle() runs; its work commits with the outcome."""
    try:
        result = action().handle(ctx, input)
    except Exception as exc:  # the action's own failure: recorded, told in short
        db.session.rollback()
        log.exception("handle() of %s failed for approval %s", approval.action, approval.id)
        return _finish(approval, Status.FAILED, actor, result=short(exc), filled=filled)
    said = "" if result is None else str(result)
    if filled is not None:
        said = f"{filled_line(filled)} {said}".strip()
    status = Status.QUEUED if action.delivery is Delivery.QUEUED else Status.DONE  # then delivery settles it
    return _finish(approval, status, actor, result=said, filled=filled)  # (queued: the front door hands it on)


def filled_line(filled: list[str]) -> str:
    """What the model (and the audit log) learn of a form's answer: the names, never the values."""
    return f"The person filled in: {', '.join(filled) or 'nothing'}."


def short(exc: Exception) -> str:
    """A failure as the model and the card tell it: one line, never a server path (an OSError's
    file names are left out); a PartlyDone keeps its whole account of what was and wasn't done."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[: 1000 if isinstance(exc, PartlyDone) else 200]


def _finish(
    approval: Approval, status: Status, actor: Actor, result: str | None = None, filled: list[str] | None = None, **values: Any
) -> Approval:
    """Record the outcome of a claimed approval, with the handler's work, in one commit.
    If a sweep already ended it `interrupted` (a handle() slower than the grace), the work
    is rolled back and the approval stays interrupted."""
    detail = filled_line(filled) if filled is not None else ""
    if approval.confirmed_by is not None:  # a countersigned card: both signatures, in the decided row
        detail = f"{detail} confirmed by user {approval.confirmed_by}, countersigned by user {actor.user.id}".strip()
    values.update(result=result, filled=filled)
    if not move(approval, status, actor.user.id, actor.channel, detail, source=Status.RUNNING, **values):
        db.session.refresh(approval)
    return approval


def move(
    approval: Approval,
    status: Status,
    user_id: int,
    channel: str,
    detail: str = "",
    *,
    source: Status = Status.PENDING,
    when: list[Any] | None = None,
    **values: Any,
) -> bool:
    """Every change of an approval's status: a conditional UPDATE from `source` (only one caller
    anywhere wins), a final status audited and dated, one commit. False, rolled back, if lost."""
    now = utcnow()
    if status.final:
        values.setdefault("decided_at", now)  # (a delivery keeps its person's decision's time)
    statement = sa.update(Approval).where(Approval.id == approval.id, Approval.status == source, *(when or []))
    if not won(statement.values(status=status, **values)):
        db.session.rollback()
        return False
    if status.final or status is Status.COUNTERSIGNING:  # the first of two signatures is audited too
        audit.record(
            ("approval.delivered" if source is Status.QUEUED else "approval.decided") if status.final else "approval.signed",
            status,
            tenant_id=approval.tenant_id,
            user_id=user_id,
            approval_id=approval.id,
            detail=f"{approval.action} {detail}".strip(),
            channel=channel,
        )
    commit_kept(approval, status=status, **values)  # (no reads again: the approval as just written)
    events.card_changed(approval.conversation_id, approval.id, status)  # every open view follows
    return True


def revoke(approval_id: str, admin: User, channel: str = "admin", by_agent: bool = False) -> Approval:
    """An admin ends a pending approval of their tenant as `revoked`; nothing runs.
    AgentCannotAnswer for an agent credential (it decides no card, not even as an admin's),
    NotFound outside the admin's tenant, WrongPerson for a non-admin, AlreadyDecided if answered."""
    actor = Actor(user=admin, binding="admin", channel=channel, agent=by_agent)
    if by_agent:
        raise refuse(AgentCannotAnswer(), "revoke_agent_credential", actor, None, approval_id)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != admin.tenant_id:
        raise refuse(NotFound(), "revoke_not_found", actor, None, approval_id)
    if not admin.is_admin:
        raise refuse(WrongPerson("Only an admin of this tenant may revoke."), "revoke_not_admin", actor, approval, approval_id)
    if not any(move(approval, Status.REVOKED, admin.id, channel, source=s, decided_by=admin.id) for s in WAITING):
        raise refuse(already_decided(approval, admin.id), "revoke_already_decided", actor, approval, approval_id)
    return approval


def cancel(approval: Approval, actor: Actor, detail: str) -> bool:
    """An open card of a conversation being deleted ends `cancelled` (nothing runs); False if
    someone decided it first."""
    return move(approval, Status.CANCELLED, actor.user.id, actor.channel, detail, source=Status(approval.status))


def supersede(approval_id: str, channel: str) -> Approval | None:
    """A newer card took this one's place in a chat thread: pending -> superseded, nothing runs."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or not move(approval, Status.SUPERSEDED, approval.user_id, channel):
        return None
    return approval


def expire(approval: Approval, channel: str = "system") -> bool:
    """Mark a pending approval past its time as expired (conditionally); its time covers both
    signatures, so one waiting for its countersignature expires the same way."""
    when = [Approval.expires_at <= utcnow()]
    return any(move(approval, Status.EXPIRED, approval.user_id, channel, source=s, when=when) for s in WAITING)


def due_for_expiry(conversation_id: int | None = None, user_id: int | None = None) -> list[Approval]:
    """Waiting approvals past their time (in one conversation, or one person's, or all)."""
    query = sa.select(Approval).where(Approval.status.in_(WAITING), Approval.expires_at <= utcnow())
    if conversation_id is not None:
        query = query.where(Approval.conversation_id == conversation_id)
    if user_id is not None:
        query = query.where(Approval.user_id == user_id)
    return list(db.session.scalars(query))


def mark_interrupted(older_than_seconds: int) -> list[Approval]:
    """Approvals claimed but never finished (their process died): end them `interrupted`.
    They are never run again."""
    cutoff = utcnow() - timedelta(seconds=older_than_seconds)
    query = sa.select(Approval).where(Approval.status == Status.RUNNING, Approval.claimed_at <= cutoff)
    stuck = list(db.session.scalars(query))
    return [a for a in stuck if move(a, Status.INTERRUPTED, a.user_id, "system", source=Status.RUNNING)]


def pending_for(user: User) -> list[Approval]:
    """The person's own pending approvals, newest first."""
    query = sa.select(Approval).where(Approval.user_id == user.id, Approval.status == Status.PENDING)
    return list(db.session.scalars(query.order_by(Approval.created_at.desc())))
