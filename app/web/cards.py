"""The card's and the form's view-model for the browser: what partials/_card.html and _form.html
show of an approval, for this session (a token only while it may answer)."""

from __future__ import annotations

from typing import Any

from flask import render_template, request

from app.copilot import agent
from app.copilot.countersigning import may_countersign
from app.copilot.schema import wtform_class
from app.copilot.tokens import Actor, may_answer, sign, sign_second
from app.extensions import db
from app.models import Approval, User, utcnow
from app.status import Status, card_line


def outcome_label(approval: Approval) -> str:
    """The card's outcome row, in the action's own words when it ran; a submitted form's names the
    fields the person filled (never their values)."""
    if approval.type == "form" and approval.status == Status.DONE:
        return f"Submitted · filled in: {', '.join(approval.filled or [])}"
    action = agent.engine().registry.get(approval.action) if approval.status == Status.DONE else None
    return card_line(approval, (action.done_label or action.kind.done_label) if action else "Done")


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
    if approval.type == "form" and approval.form and pending:
        form_class = wtform_class(approval.form["requestedSchema"])
        form = form_class(formdata=typed) if typed is not None else form_class(data=_defaults(approval.form))
        for name, messages in (field_errors or {}).items():
            if name in form:
                form[name].errors = list(messages)
    return {
        "form": form,
        "approval": approval,
        "token": sign(approval, actor.binding) if answerable else None,
        "pending": pending,
        "seconds_left": seconds_left,
        "outcome": None if pending else outcome_label(approval),
        "error": error,
        **second_signature(approval, actor),
    }


def second_signature(approval: Approval, actor: Actor) -> dict[str, Any]:
    """A card waiting for its countersignature: who confirmed it, and a token for this session
    while it may still be answered here — its person's (to decline it) or an allowed second
    person's countersignature token (never for an agent credential, never the person's own)."""
    waiting = approval.status == Status.COUNTERSIGNING and approval.expires_at > utcnow()
    if not waiting:
        return {"countersigning": False, "second_token": None, "confirmed_by": None}
    mine = approval.user_id == actor.user.id
    allowed = not mine and may_answer(actor, approval) and may_countersign(approval, actor.user, agent.engine().registry)
    confirmer = db.session.get(User, approval.confirmed_by) if approval.confirmed_by else None
    return {
        "countersigning": True,
        "token": sign(approval, actor.binding) if mine and may_answer(actor, approval) else None,
        "second_token": sign_second(approval.id, actor.user, actor.binding) if allowed else None,
        "confirmed_by": confirmer.email if confirmer else None,
    }


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
    name = "partials/_form.html" if approval.type == "form" else "partials/_card.html"
    return render_template(name, ctx=context)
