"""The approval's records and moves: a card or a form created for a call, the checks an answer
passes before anything runs (still open, claimed by one caller only, authorized again, the
context it runs in), every change of status (`move`: one conditional UPDATE, audited, one commit),
and the ends that run nothing: revoke, supersede, expire, interrupted, a deleted conversation's.

The answers are _answer.py's, handle() is _handle.py's; tokens and who may answer are in
_tokens.py, the card's text in _cards.py, the form's schema and validation in _forms.py, the
second signature in _countersigning.py, how many may wait in _caps.py; every status word in
app/status.py."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from app.copilot import audit, events
from app.copilot.actions import Action, ActionContext
from app.copilot.approvals._caps import check_cap
from app.copilot.approvals._cards import Card, build_card
from app.copilot.approvals._decided import already_decided
from app.copilot.approvals._forms import form_for
from app.copilot.approvals._tokens import Actor, Proof, asked_by, reachable, refuse, ttl
from app.errors import (
    AgentCannotAnswer,
    CountersignError,
    Expired,
    NotFound,
    PartlyDone,
    WrongPerson,
)
from app.extensions import DATABASE_AWAY, commit_kept, db, won
from app.models import Approval, Run, User, utcnow
from app.status import ApprovalType, Refusal, Status

log = logging.getLogger(__name__)

WAITING = (Status.PENDING, Status.COUNTERSIGNING)  # still waiting for a signature: its person's, or a second one


def new(ctx: ActionContext, run: Run, action: type[Action], **fields: Any) -> Approval:
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
    return new(ctx, run, action, tool_call_id=tool_call_id, step=step, type=ApprovalType.CONFIRM, **fields)


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
    return new(ctx, run, action, tool_call_id=tool_call_id, step=step, type=ApprovalType.FORM, **fields)


def check_open(approval: Approval, actor: Actor, withdrawing: bool = False) -> None:
    """Raise Expired or AlreadyDecided (audited) unless the approval can still be answered (its
    person may still decline one that waits for its countersignature: `withdrawing`)."""
    if approval.status in WAITING and approval.expires_at <= utcnow():
        expire(approval, channel=actor.channel)
    if approval.status == Status.EXPIRED:
        raise refuse(Expired(), Refusal.EXPIRED, actor, approval, approval.id)
    if approval.status != Status.PENDING and not (withdrawing and approval.status == Status.COUNTERSIGNING):
        raise refuse(already_decided(approval, actor.user.id), Refusal.already(approval.status), actor, approval, approval.id)


def claim(
    approval: Approval, status: Status, actor: Actor, detail: str = "", *, source: Status = Status.PENDING, **values: Any
) -> None:
    """Move source -> status atomically (only one caller anywhere wins); AlreadyDecided else."""
    now = utcnow()
    stamps = {"claimed_at": now, "decided_by": actor.user.id, **values}
    when = [Approval.expires_at > now]
    if not move(approval, status, actor.user.id, actor.channel, detail, source=source, when=when, **stamps):
        raise refuse(already_decided(approval, actor.user.id), Refusal.LOST_CLAIM, actor, approval, approval.id)


def claim_outright(approval_id: str, proof: Proof, actor: Actor) -> Approval | None:
    """The common confirm, claimed in one statement: verify()'s and check_open()'s checks are the
    WHERE of the claim's conditional UPDATE … RETURNING (this person's card in their tenant, one
    signature, still pending and in its time, within the credential's toolsets), after a proof
    read as theirs. Only one caller anywhere wins. None, nothing written, when any check fails:
    then the checks one by one say which, each refusal audited (answer's slower path)."""
    if not proof.names(actor):
        return None
    now = utcnow()
    where = [
        Approval.id == approval_id,
        Approval.tenant_id == actor.user.tenant_id,
        Approval.user_id == actor.user.id,
        Approval.type == ApprovalType.CONFIRM,
        sa.func.coalesce(Approval.countersign, "") == "",  # a second signature's card: first_signature
        Approval.status == Status.PENDING,
        Approval.expires_at > now,
    ]
    if actor.toolsets is not None:
        where.append(Approval.action.in_(sorted(reachable(actor.toolsets))))
    claimed = (
        sa.update(Approval)
        .where(*where)
        .values(status=Status.RUNNING, claimed_at=now, decided_by=actor.user.id)
        .returning(Approval)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    approval = db.session.scalars(claimed).first()
    if approval is None:
        return None
    commit_kept()  # (the approval as the UPDATE returned it)
    events.card_changed(approval.conversation_id, approval.id, Status.RUNNING)  # every open view follows
    return approval


def context(actor: Actor, approval: Approval) -> ActionContext:
    return ActionContext(user=actor.user, tenant=actor.user.tenant, db=db.session, channel=actor.channel, approval_id=approval.id)


def authorized(action: type[Action], ctx: ActionContext, input: BaseModel) -> bool:
    try:
        return bool(action().authorize(ctx, input))
    except (CountersignError, PermissionError):
        return False


def filled_line(filled: list[str]) -> str:
    """What the model (and the audit log) learn of a form's answer: the names, never the values."""
    return f"The person filled in: {', '.join(filled) or 'nothing'}."


def short(exc: Exception) -> str:
    """A failure as the model and the card tell it: one line, never a server path (an OSError's
    file names are left out) nor the database's own words (its statements, values, pool); a
    PartlyDone keeps its whole account of what was and wasn't done."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, DATABASE_AWAY):
        return "the database did not answer in time"
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return "the database refused the change"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[: 1000 if isinstance(exc, PartlyDone) else 200]


def finish(
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
        raise refuse(AgentCannotAnswer(), Refusal.REVOKE_AGENT_CREDENTIAL, actor, None, approval_id)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != admin.tenant_id:
        raise refuse(NotFound(), Refusal.REVOKE_NOT_FOUND, actor, None, approval_id)
    if not admin.is_admin:
        raise refuse(
            WrongPerson("Only an admin of this tenant may revoke."), Refusal.REVOKE_NOT_ADMIN, actor, approval, approval_id
        )
    if not any(move(approval, Status.REVOKED, admin.id, channel, source=s, decided_by=admin.id) for s in WAITING):
        raise refuse(already_decided(approval, admin.id), Refusal.REVOKE_ALREADY_DECIDED, actor, approval, approval_id)
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
