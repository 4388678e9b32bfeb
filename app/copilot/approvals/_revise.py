"""The answers that revise a card, on _machine's own create, claim and move: an edit before
confirm (a fresh card from the edited input), and a fresh card for one that changed, with the rows
that changed; and what the model reads of a decided card (told). None runs handle(): a fresh card
is confirmed through approvals like any card. A decline is _decline.py's."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from flask import current_app
from pydantic import BaseModel

from app.copilot import audit, events
from app.copilot.actions import Action, ActionContext, Registry, elicitation, secret_fields
from app.copilot.approvals import _machine as approvals
from app.copilot.approvals._caps import check_cap
from app.copilot.approvals._cards import Card, build_card
from app.copilot.approvals._forms import validate_form
from app.copilot.approvals._outcomes import model_outcome
from app.copilot.approvals._tokens import Actor, refuse
from app.errors import AlreadyDecided, BadValues, CountersignError, TooManyPending, WrongPerson
from app.extensions import db
from app.models import Approval, Message, Run
from app.status import SECOND_DECLINED, ApprovalType, Decision, Refusal, Role, RunNext, RunStatus, Status

# What each of these answers may be given to.
ANSWERS: dict[str, ApprovalType] = {
    Decision.EDIT: ApprovalType.CONFIRM,
    Decision.REFRESH: ApprovalType.CONFIRM,
}


def answer(approval: Approval, actor: Actor, decision: str, registry: Registry, values: Mapping[str, Any]) -> Approval:
    """A verified answer (approvals.answer): 'edit' (the edited values: returns the fresh card) or
    'refresh' (a changed card: returns its fresh card)."""
    if approval.type != ANSWERS[decision]:
        raise BadValues(f"This {approval.type} cannot be answered with {decision}.")
    if decision == Decision.REFRESH:
        return _refresh(approval, actor, registry)
    approvals.check_open(approval, actor)
    return _edit(approval, actor, registry, values)


# --- edit before confirm -------------------------------------------------------------------------


def edit_form(action: type[Action], approval: Approval) -> dict[str, Any] | None:
    """The Edit form of a card (MCP's form elicitation, like any form): the action's `editable`
    fields, pre-filled from the card's validated input. None when the action edits nothing. A
    secret field is never in it (discovery refuses one in `editable`; this checks again)."""
    names = [n for n in action.editable if n not in secret_fields(action.Input)]
    if not names:
        return None
    message = "Edit the request. A fresh card will ask you to confirm it."
    return elicitation(action.Input, message, fields=names, defaults=approval.arguments, where=action.source)


def _edit(approval: Approval, actor: Actor, registry: Registry, values: Mapping[str, Any]) -> Approval:
    """Edit before confirm: the edited values make a fresh card, authorized again and rebuilt by
    the action, in this pending card's place (it ends `edited`, audited with the changed fields'
    names only). The fresh card keeps the model's call (its tool_call_id): its outcome is what
    the model reads, after the names of the fields edited."""
    action, input, changed = _edited(approval, actor, registry, values)
    ctx = approvals.context(actor, approval)
    if not approvals.authorized(action, ctx, input):
        message = "You may not do this with the edited values. The card is unchanged."
        raise refuse(WrongPerson(message), Refusal.EDIT_REFUSED, actor, approval, approval.id)
    card = _rebuilt(action, ctx, input, actor, approval, Refusal.EDIT_NOT_FOUND)
    run = db.session.get(Run, approval.run_id)
    assert run is not None
    edited = list(dict.fromkeys([*(approval.edited or []), *changed]))
    fresh = _fresh(ctx, run, action, approval, card, input, edited=edited)
    # One commit: the run never sees neither card pending (it would resume without an answer).
    approvals.claim(approval, Status.EDITED, actor, edited_line(changed))
    db.session.refresh(fresh)
    return fresh


def _edited(
    approval: Approval, actor: Actor, registry: Registry, values: Mapping[str, Any]
) -> tuple[type[Action], BaseModel, list[str]]:
    """The action, the edited input (WTForms, then Input) and the names of the fields it changes;
    refused (audited) for a card that edits nothing or a field that is not editable."""
    action = registry.get(approval.action)
    form = edit_form(action, approval) if action is not None else None
    if action is None or form is None:
        message = "This card cannot be edited: confirm or decline it."
        raise refuse(BadValues(message), Refusal.EDIT_NOT_EDITABLE, actor, approval, approval.id)
    schema = form["requestedSchema"]
    if any(name not in schema["properties"] for name in values):  # a secret, the operation, a stray name
        message = f"Only {', '.join(schema['properties'])} can be edited on this card. Nothing was changed."
        raise refuse(BadValues(message), Refusal.EDIT_FIELD_NOT_EDITABLE, actor, approval, approval.id)
    input, _ = validate_form(schema, action, approval.arguments, values)
    after = input.model_dump(mode="json")
    changed = [name for name in schema["properties"] if after.get(name) != approval.arguments.get(name)]
    if not changed:
        raise BadValues("Nothing was changed: confirm or decline the card as it is.")
    return action, input, changed


def edited_line(edited: list[str]) -> str:
    """What the model (and the audit log) learn of an edit: the names, never the values."""
    return f"The person edited: {', '.join(edited)}."


# --- what changed, and a fresh card --------------------------------------------------------------


def row_changes(approval: Approval, card: Card) -> list[dict[str, str]]:
    """What differs between the card the person confirmed and the card rebuilt now, by label
    (a row added or gone has an empty side), and the sentence when it differs."""
    before = {r["label"]: r["value"] for r in approval.rows}
    after = {r["label"]: r["value"] for r in card.rows}
    changes = [
        {"label": label, "before": before.get(label, ""), "after": after.get(label, "")}
        for label in dict.fromkeys([*before, *after])
        if before.get(label) != after.get(label)
    ]
    if card.reason != approval.reason:
        changes.insert(0, {"label": "Request", "before": approval.reason, "after": card.reason})
    return changes


def changed(approval: Approval, actor: Actor, card: Card) -> Approval:
    """A claimed card that no longer reads the same: `changed`, nothing run, with the rows that
    differ (approvals.confirmed's outcome for a card whose digest moved)."""
    return approvals.finish(approval, Status.CHANGED, actor, changes=row_changes(approval, card))


def _refresh(approval: Approval, actor: Actor, registry: Registry) -> Approval:
    """A changed card's Fresh card: a new pending card of the same call, authorized again and
    rebuilt from the records as they are now; the changed one stays `changed`. The model read
    `changed` already, so the fresh card waits in a run of its own whose answer reaches it as news.
    One fresh card per changed card: its id is derived from the old one's (a second press collides)."""
    if approval.status != Status.CHANGED or not approval.changes:
        message = "Only a card that changed since you were asked can be made afresh."
        raise refuse(AlreadyDecided(message), Refusal.refresh(approval.status), actor, approval, approval.id)
    action = registry.get(approval.action)
    if action is None:
        raise BadValues("This action no longer exists.")
    ctx = approvals.context(actor, approval)
    input = action.Input.model_validate(approval.arguments)
    if not approvals.authorized(action, ctx, input):
        message = "You may no longer do this. No fresh card was made."
        raise refuse(WrongPerson(message), Refusal.REFRESH_REFUSED, actor, approval, approval.id)
    return _afresh(approval, actor, action, ctx, input)


def _afresh(approval: Approval, actor: Actor, action: type[Action], ctx: ActionContext, input: BaseModel) -> Approval:
    """The fresh card of a changed one, in a run of its own, audited as made from it; a second one
    collides on its id (AlreadyDecided)."""
    run = _run_for_fresh(approval)
    try:
        check_cap(ctx, run, action)
    except TooManyPending:
        db.session.commit()  # its audit row; nothing else was added
        raise
    card = _rebuilt(action, ctx, input, actor, approval, Refusal.REFRESH_NOT_FOUND)
    db.session.add(run)
    db.session.flush()
    try:
        fresh = _fresh(ctx, run, action, approval, card, input, id=fresh_id(approval.id), edited=approval.edited)
    except sa.exc.IntegrityError:
        db.session.rollback()
        again = AlreadyDecided("A fresh card was already made from this one.")
        raise refuse(again, Refusal.REFRESH_AGAIN, actor, approval, approval.id) from None
    audit.record(
        "approval.refreshed",
        Status.PENDING,
        tenant_id=approval.tenant_id,
        user_id=actor.user.id,
        approval_id=approval.id,
        detail=f"{approval.action}: fresh card {fresh.id}",
        channel=actor.channel,
    )
    db.session.commit()
    events.card_changed(approval.conversation_id, approval.id, approval.status)  # every view: the fresh card after it
    db.session.refresh(fresh)
    return fresh


def _run_for_fresh(approval: Approval) -> Run:
    """The run a fresh card of a changed one waits in: the old run's credential and toolsets, paused
    (an MCP client's call stays its own, `external`)."""
    old = db.session.get(Run, approval.run_id)
    assert old is not None
    status = RunStatus.EXTERNAL if old.status == RunStatus.EXTERNAL else RunStatus.PAUSED
    return Run(
        conversation_id=approval.conversation_id,
        status=status,
        next=RunNext.RESULTS,
        step=1,
        channel=old.channel,
        via=old.via,
        agent=old.agent,
        toolsets=old.toolsets,
    )


def fresh_id(approval_id: str) -> str:
    """The id of the one fresh card a changed card may have: unguessable without SECRET_KEY."""
    key = str(current_app.config["SECRET_KEY"]).encode()
    return hmac.new(key, f"fresh:{approval_id}".encode(), hashlib.sha256).hexdigest()[:32]


# --- shared by both fresh cards ------------------------------------------------------------------


def _rebuilt(action: type[Action], ctx: ActionContext, input: BaseModel, actor: Actor, old: Approval, why: str) -> Card:
    """The action's card for this input; its refusal (a record gone or out of reach) audited."""
    try:
        return build_card(action, ctx, input)
    except CountersignError as error:
        db.session.rollback()
        raise refuse(error, why, actor, old, old.id) from None


def _fresh(
    ctx: ActionContext, run: Run, action: type[Action], old: Approval, card: Card, input: BaseModel, **fields: Any
) -> Approval:
    """A pending card replacing `old` (approvals' own create: the same stored fields, its two-person
    rule included), shown where `old` was shown."""
    fresh = approvals.new(
        ctx,
        run,
        action,
        tool_call_id=old.tool_call_id,
        step=run.step if run.id != old.run_id else old.step,
        type=ApprovalType.CONFIRM,
        replaces=old.id,
        requested_via=old.requested_via,  # whoever asked for the card asked for its edit's too
        requested_by_agent=old.requested_by_agent,
        **approvals.card_fields(action, input, card),
        **fields,
    )
    line = db.session.scalar(sa.select(Message).where(Message.approval_id == old.id).order_by(Message.id).limit(1))
    if line is not None:
        step = line.step if line.run_id == run.id else run.step
        db.session.add(
            Message(conversation_id=old.conversation_id, role=Role.CARD, approval_id=fresh.id, run_id=run.id, step=step)
        )
    return fresh


# --- what the model reads --------------------------------------------------------------------------


def told(approval: Approval) -> str:
    """The line the model reads for a decided approval: its outcome (app/status.py), after it the
    names of the fields the person edited, and with a decline the decliner's own reason — the
    person's, or the second signer's, each named as such — quoted as a JSON string (it cannot end
    its quotes early; line and paragraph separators escaped too) and marked as their words."""
    line = model_outcome(approval)
    second = approval.status == Status.DECLINED and approval.confirmed_by is not None and approval.decided_by != approval.user_id
    if second:
        line = SECOND_DECLINED
    if approval.edited and approval.replaces:
        line = f"{edited_line(approval.edited)} {line}"
    if approval.feedback and approval.status == Status.DECLINED:
        words = json.dumps(approval.feedback, ensure_ascii=False)
        for separator in ("\u2028", "\u2029", "\u0085"):
            words = words.replace(separator, f"\\u{ord(separator):04x}")
        line += f" {'The second signer' if second else 'The person'}'s reason, in their own words: {words}"
    return line


def standing(approval: Approval) -> Approval:
    """The card that now stands for this one: the fresh card its edit or refresh made (and
    theirs, in turn), or itself."""
    seen = {approval.id}
    while True:
        fresh = db.session.scalar(
            sa.select(Approval).where(Approval.replaces == approval.id).order_by(Approval.created_at.desc()).limit(1)
        )
        if fresh is None or fresh.id in seen or fresh.user_id != approval.user_id:
            return approval
        seen.add(fresh.id)
        approval = fresh
