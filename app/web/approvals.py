"""A card's answers from the browser (confirm, decline, cancel, submit, edit, refresh, the
countersignature) and the card's own page, which follows its changes live."""

from __future__ import annotations

from typing import Any

from flask import make_response, redirect, render_template, request, url_for
from flask_login import login_required

from app import copilot, sse
from app.auth import current_actor
from app.copilot import events
from app.copilot.approvals import Actor, may_see, recover
from app.copilot.events import Event
from app.errors import CountersignError, FormInvalid, NotFound, WrongPerson
from app.extensions import db, limit_per_person_and_address
from app.models import Approval, Conversation, utcnow
from app.status import ANSWERED, REVISED, Decision, EventType, Status
from app.web.blueprint import bp
from app.web.cards import card_context, edit_errors, prompt_context, render_partial, submitted_values
from app.web.messages import messages_after, render_messages
from app.web.streams import card_event


@bp.get("/approvals/<approval_id>")
@login_required
def approval_page(approval_id: str) -> Any:
    """The card on a page of its own (the target of links from MCP and connectors), following
    its changes live. For htmx, the card alone: a page's countdown that reaches 0 asks for it
    (static/app.js), so an expired card shows expired whether or not a sweep has run, and every
    other open view of it follows (the expiry is published like any change)."""
    actor = current_actor()
    approval = _own_approval(approval_id, actor)
    if approval.status in (Status.PENDING, Status.COUNTERSIGNING) and approval.expires_at <= utcnow():
        copilot.expire_due(approval.conversation_id)
        db.session.refresh(approval)
    if request.htmx:  # type: ignore[attr-defined]
        response = make_response(render_partial(card_context(approval, actor)))
        response.headers["Vary"] = "HX-Request"
        return response
    cursor = events.last_id(approval.conversation_id)  # then the card as it is now: no change falls between
    db.session.refresh(approval)
    conversation = db.session.get(Conversation, approval.conversation_id)
    deleted = conversation is None or conversation.deleted_at is not None  # the card stays, as decided
    return render_template(
        "approvals/page.html", actor=actor, approval=approval, ctx=card_context(approval, actor), deleted=deleted, cursor=cursor
    )


@bp.get("/approvals/<approval_id>/events")
@login_required
def approval_events(approval_id: str) -> Any:
    """The card's own page follows its conversation's events as its viewer (the person, or a
    second person its rule allows): only this card's changes, each as the card in its new state."""
    actor = current_actor()
    conversation_id = _own_approval(approval_id, actor).conversation_id

    def shown(event: Event) -> tuple[str, str] | None:
        if event.type != EventType.APPROVAL or event.data.get("id") != approval_id:
            return None
        html = card_event(event, actor, conversation_id)
        return None if html is None else ("message", html)

    return sse.stream(conversation_id, actor.user.id, shown)


def _own_approval(approval_id: str, actor: Actor) -> Approval:
    """The card, for whoever may see it (approvals.may_see: its person, or a second person of a
    card that needs one); 404 outside the tenant, 403 else."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != actor.user.tenant_id:
        raise NotFound()
    if not may_see(approval, actor):
        raise WrongPerson()
    return approval


@bp.post("/approvals/<approval_id>/countersign", defaults={"decision": Decision.COUNTERSIGN}, endpoint="countersign")
@bp.post("/approvals/<approval_id>/countersign/decline", defaults={"decision": Decision.DECLINE}, endpoint="countersign_decline")
@login_required
@limit_per_person_and_address("ANSWERS")
def countersign(approval_id: str, decision: str) -> Any:
    """The second signature (or a decline) by a signed-in person of the tenant whom the card's
    rule allows, with the countersignature token their page was given (CSRF-checked like every
    POST): the card in its new state; without htmx, its page."""
    actor = current_actor()
    token = request.form.get("token", "")
    try:  # a reason too long is refused whole (the decline's reason check), never cut
        approval = copilot.countersign(approval_id, token, actor, decision, request.form.get("reason"))
    except CountersignError as error:  # someone the rule does not allow sees the error, never the card
        context, status = prompt_context(recover(approval_id, actor, error)), error.status
    else:
        context, status = card_context(approval, actor), 200
    if not request.htmx:  # type: ignore[attr-defined]
        if status == 200:
            return redirect(url_for("web.approval_page", approval_id=approval_id))
        page = db.session.get(Approval, approval_id)  # (recover found it: the viewer may see it)
        return render_template("approvals/page.html", actor=actor, approval=page, ctx=context), status
    response = make_response(render_partial(context), status)
    response.headers["Vary"] = "HX-Request"
    return response


@bp.post(f"/approvals/<approval_id>/<any({', '.join(ANSWERED)}):decision>")
@login_required
@limit_per_person_and_address("ANSWERS")
def answer(approval_id: str, decision: str) -> Any:
    """Confirm or Decline: returns the same card in its new state, then the model's reply."""
    actor = current_actor()
    token = request.form.get("token", "")
    try:
        values = submitted_values(approval_id) if decision == Decision.SUBMIT else None
        reason = request.form.get("reason") if decision == Decision.DECLINE else None
        approval = copilot.answer(approval_id, token, actor, decision, values, reason)
    except CountersignError as error:
        fields = error.fields if isinstance(error, FormInvalid) else None
        typed = request.form if fields is not None else None
        context = prompt_context(recover(approval_id, actor, error), typed=typed, field_errors=fields)
        context["reason"] = request.form.get("reason", "")  # kept for another try (too long, say)
        body = render_partial(context)
        added = []
        status = error.status
    else:
        # The card's final state now; the model's continuation streams in under it (or is here
        # already, when it ran inline).
        body = render_partial(card_context(approval, actor))
        card_line = copilot.card_message_id(approval)
        added = [m for m in messages_after(approval.conversation_id, card_line) if m.run_id == approval.run_id]
        status = 200
    if added:
        body += render_messages(added, actor, oob=True)
    if not request.htmx and status == 200:  # type: ignore[attr-defined]
        return redirect(url_for("web.chat", conversation_id=approval.conversation_id))
    response = make_response(body, status)
    response.headers["Vary"] = "HX-Request"
    return response


@bp.post(f"/approvals/<approval_id>/<any({', '.join(REVISED)}):decision>")
@login_required
@limit_per_person_and_address("ANSWERS")
def revise(approval_id: str, decision: str) -> Any:
    """Edit a pending card, or ask a changed card afresh: the card in its new state, and the fresh
    card out of band after it, which the person then confirms."""
    actor = current_actor()
    token = request.form.get("token", "")
    values = {k: v for k, v in request.form.items() if k not in ("token", "csrf_token")} if decision == Decision.EDIT else None
    try:
        fresh = copilot.answer(approval_id, token, actor, decision, values)
    except CountersignError as error:
        context = prompt_context(recover(approval_id, actor, error))
        if decision == Decision.EDIT:
            edit_errors(context, request.form, error.fields if isinstance(error, FormInvalid) else {})
        response = make_response(render_partial(context), error.status)
        response.headers["Vary"] = "HX-Request"
        return response
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect(url_for("web.chat", conversation_id=fresh.conversation_id))
    old = db.session.get(Approval, approval_id)
    assert old is not None
    db.session.refresh(old)
    # The fresh card goes out of band, placed after the old one (app.js): the event stream brings it
    # too, and whichever comes second finds it on the page and adds no second copy.
    fresh_context = card_context(fresh, actor)
    fresh_context["oob"] = True
    body = render_partial(card_context(old, actor)) + render_partial(fresh_context)
    response = make_response(body, 200)
    response.headers["Vary"] = "HX-Request"
    return response
