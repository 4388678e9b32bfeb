"""The card's and the form's view-model for the browser: the engine's Prompt of an approval for
this session (app.copilot.approvals.prompt_for), and the WTForms forms partials/_card.html and
_form.html show with it."""

from __future__ import annotations

from typing import Any

from flask import render_template, request

from app.copilot.actions import wtform_class
from app.copilot.approvals import REASON_MAX, Actor, Prompt, prompt_for
from app.extensions import db
from app.models import Approval
from app.status import ApprovalType


def card_context(approval: Approval, actor: Actor) -> dict[str, Any]:
    """What _card.html / _form.html need to show this approval to this session now."""
    return prompt_context(prompt_for(approval, actor))


def prompt_context(prompt: Prompt, typed: Any = None, field_errors: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """What _card.html / _form.html need: the card's Prompt for this session (its words, its
    tokens, its outcome: the engine's, never decided here) and the browser's own forms — for a
    form the WTForms form (refilled with what was typed after an error), for a card its Edit form."""
    form = None
    if prompt.form and prompt.asking:
        form_class = wtform_class(prompt.form["requestedSchema"])
        form = form_class(formdata=typed) if typed is not None else form_class(data=_defaults(prompt.form))
        for name, messages in (field_errors or {}).items():
            if name in form:
                form[name].errors = list(messages)
    edit = wtform_class(prompt.edit["requestedSchema"])(data=_defaults(prompt.edit)) if prompt.edit else None
    return {
        "prompt": prompt,
        "form": form,
        "edit_form": edit,
        "reason_max": REASON_MAX,
        "error": prompt.error,
    }


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


def render_partial(context: dict[str, Any]) -> str:
    """The card's or the form's fragment, in its current state."""
    name = "partials/_form.html" if context["prompt"].type == ApprovalType.FORM else "partials/_card.html"
    return render_template(name, ctx=context)
