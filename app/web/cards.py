"""The card's and the form's view-model for the browser: what partials/_card.html and _form.html
show of an approval, for this session (a token only while it may answer)."""

from __future__ import annotations

from typing import Any

from flask import render_template, request

from app import copilot
from app.copilot.actions import wtform_class
from app.copilot.approvals import Actor, card_label, decided_by_line, may_answer, may_countersign, sign, sign_second
from app.extensions import db
from app.models import Approval, User, utcnow
from app.status import ApprovalType, Status, badge


def card_context(
    approval: Approval,
    actor: Actor,
    error: str | None = None,
    typed: Any = None,
    field_errors: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """What _card.html / _form.html need: the approval, a token for this session while it is
    pending, and for a form the WTForms form (refilled with what was typed after an error)."""
    mine = approval.user_id == actor.user.id
    pending = approval.status == Status.PENDING and approval.expires_at > utcnow()
    seconds_left = max(0, int((approval.expires_at - utcnow()).total_seconds()))
    answerable = mine and pending and may_answer(actor, approval)
    form = None
    if approval.type == ApprovalType.FORM and approval.form and pending:
        form_class = wtform_class(approval.form["requestedSchema"])
        form = form_class(formdata=typed) if typed is not None else form_class(data=_defaults(approval.form))
        for name, messages in (field_errors or {}).items():
            if name in form:
                form[name].errors = list(messages)
    context = {
        "form": form,
        "approval": approval,
        "token": sign(approval, actor.binding) if answerable else None,
        "pending": pending,
        "seconds_left": seconds_left,
        "outcome": None if pending else card_label(approval),
        "badge": None if pending else badge(approval),
        "decided_by": None if pending else decided_by_line(approval, actor.user.id),
        "error": error,
        **countersigning_context(approval, actor),
    }
    context.update(revise_context(approval, actor, answerable))
    return context


def countersigning_context(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A card waiting for its countersignature: who confirmed it, and a token for this session
    while it may still be answered here — its person's (to decline it) or an allowed second
    person's countersignature token (never for an agent credential, never the person's own)."""
    waiting = approval.status == Status.COUNTERSIGNING and approval.expires_at > utcnow()
    if not waiting:
        return {"countersigning": False, "second_token": None, "confirmed_by": None}
    mine = approval.user_id == actor.user.id
    allowed = not mine and may_answer(actor, approval) and may_countersign(approval, actor.user, copilot.engine().registry)
    confirmer = db.session.get(User, approval.confirmed_by) if approval.confirmed_by else None
    return {
        "countersigning": True,
        "token": sign(approval, actor.binding) if mine and may_answer(actor, approval) else None,
        "second_token": sign_second(approval.id, actor.user, actor.binding) if allowed else None,
        "confirmed_by": confirmer.email if confirmer else None,
    }


def revise_context(approval: Approval, actor: Actor, answerable: bool) -> dict[str, Any]:
    """What a card offers beyond Confirm: the decline reason box's limit, the Edit form of the
    action's `editable` fields (pre-filled, never a secret) while it may be answered, and on a
    changed card the rows that differ with a token for its Fresh card (until one was made)."""
    from app.copilot.approvals import REASON_MAX, edit_form, fresh_id

    found: dict[str, Any] = {"reason_max": REASON_MAX, "edit_form": None, "changes": approval.changes, "fresh_id": None}
    action = copilot.engine().registry.get(approval.action)
    if answerable and approval.type == ApprovalType.CONFIRM and action is not None:
        elicited = edit_form(action, approval)
        if elicited is not None:
            found["edit_form"] = wtform_class(elicited["requestedSchema"])(data=_defaults(elicited))
    if approval.changes and approval.status == Status.CHANGED:
        fresh = db.session.get(Approval, fresh_id(approval.id))
        found["fresh_id"] = fresh.id if fresh is not None else None
        mine = approval.user_id == actor.user.id and may_answer(actor, approval)
        found["refresh_token"] = sign(approval, actor.binding) if mine and fresh is None else None
    return found


def edit_errors(context: dict[str, Any], typed: Any, errors: dict[str, list[str]]) -> dict[str, Any]:
    """The card again after a refused Edit: its form open, refilled with what was typed."""
    if context.get("edit_form") is not None:
        form = type(context["edit_form"])(formdata=typed)
        for name, messages in errors.items():
            if name in form:
                form[name].errors = list(messages)
        context["edit_form"], context["edit_open"] = form, True
    return context


def _defaults(elicitation: dict[str, Any]) -> dict[str, Any]:
    return {k: p["default"] for k, p in elicitation["requestedSchema"]["properties"].items() if "default" in p}


def submitted_values(approval_id: str) -> dict[str, Any]:
    """The browser's form as values: an unticked checkbox is sent as nothing, so it means False."""
    values: dict[str, Any] = request.form.to_dict()
    approval = db.session.get(Approval, approval_id)
    if approval is not None and approval.form:
        for name, prop in approval.form["requestedSchema"]["properties"].items():
            if prop.get("type") == "boolean" and name not in values:
                values[name] = False
    return values


def render_partial(approval: Approval, context: dict[str, Any]) -> str:
    """The card's or the form's fragment, in its current state."""
    name = "partials/_form.html" if approval.type == ApprovalType.FORM else "partials/_card.html"
    return render_template(name, ctx=context)
