"""The one place an approval's handle() runs (DESIGN §4): a claimed card is authorized again,
rebuilt and compared with what its person saw, and only then handled, as its person; a form's
values are validated first. Its work commits with the outcome (_machine.finish)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from app.copilot.actions import Action, ActionContext, Registry
from app.copilot.approvals import _revise as revise
from app.copilot.approvals._cards import build_card
from app.copilot.approvals._forms import validate_form
from app.copilot.approvals._machine import authorized, claim, context, filled_line, finish, short
from app.copilot.approvals._tokens import Actor, refuse
from app.errors import BadValues, CountersignError, FormNeedsCard
from app.extensions import db
from app.models import Approval
from app.status import Delivery, Refusal, Status

log = logging.getLogger(__name__)


def confirmed(approval: Approval, actor: Actor, registry: Registry, as_person: Actor | None = None) -> Approval:
    """A claimed card: authorize again, rebuild and compare, then handle() once, as the person
    (`as_person`: the person who asked, when `actor` gave the second signature)."""
    action = registry.get(approval.action)
    if action is None:
        return finish(approval, Status.FAILED, actor, result="this action no longer exists")
    ctx = context(as_person or actor, approval)
    try:
        input = action.Input.model_validate(approval.arguments)
    except ValidationError:
        return finish(approval, Status.REFUSED, actor)
    if not authorized(action, ctx, input):
        return finish(approval, Status.REFUSED, actor)
    try:
        card = build_card(action, ctx, input)
    except CountersignError:
        return finish(approval, Status.CHANGED, actor, result="the record is gone")
    if card.digest != approval.digest:
        return revise.changed(approval, actor, card)
    return handle(approval, actor, action, ctx, input)


def submit(approval: Approval, actor: Actor, registry: Registry, values: Mapping[str, Any]) -> Approval:
    """A form: validate (WTForms, then Input) before any claim, then authorize again and handle()
    with the person's values over the model's. The values are never stored; their names are."""
    action = registry.get(approval.action)
    if action is None or approval.form is None:
        raise BadValues("This action no longer exists.")
    input, filled = validate_form(approval.form["requestedSchema"], action, approval.arguments, values)
    if action.needs_card(input):  # whatever field made it so, on any channel: a form never gives a card
        raise refuse(FormNeedsCard(), Refusal.FORM_NEEDS_CARD, actor, approval, approval.id)
    claim(approval, Status.RUNNING, actor)
    ctx = context(actor, approval)
    if not authorized(action, ctx, input):
        return finish(approval, Status.REFUSED, actor, filled=filled)
    return handle(approval, actor, action, ctx, input, filled)


def handle(
    approval: Approval, actor: Actor, action: type[Action], ctx: ActionContext, input: BaseModel, filled: list[str] | None = None
) -> Approval:
    """The one place an approval's handle() runs; its work commits with the outcome."""
    try:
        result = action().handle(ctx, input)
    except Exception as exc:  # the action's own failure: recorded, told in short
        db.session.rollback()
        log.exception("handle() of %s failed for approval %s", approval.action, approval.id)
        return finish(approval, Status.FAILED, actor, result=short(exc), filled=filled)
    said = "" if result is None else str(result)
    if filled is not None:
        said = f"{filled_line(filled)} {said}".strip()
    status = Status.QUEUED if action.delivery is Delivery.QUEUED else Status.DONE  # then delivery settles it
    return finish(approval, status, actor, result=said, filled=filled)  # (queued: the front door hands it on)
