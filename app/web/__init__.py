"""The browser: conversations, the chat page, and the card's answers (htmx)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Blueprint, current_app, flash, make_response, redirect, render_template, request, url_for
from flask_login import login_required
from markupsafe import Markup

from app import copilot, sse
from app.auth import credential_words, current_actor
from app.copilot import conversations, events
from app.copilot.approvals import Actor, may_countersign
from app.copilot.events import Event
from app.copilot.hidden import removed, shown
from app.copilot.text import check_message
from app.errors import CountersignError, FormInvalid, NotFound, WrongPerson
from app.extensions import db, limit_per_person_and_address
from app.markdown import Live, to_html
from app.models import Approval, Conversation, Message, Run, User, utcnow
from app.status import GOING, Status
from app.web.cards import card_context, edit_errors, render_partial, submitted_values

bp = Blueprint("web", __name__)


@bp.app_template_filter("markdown")
def markdown(text: str) -> Markup:
    """The model's Markdown as sanitized HTML (app.markdown): for assistant messages only."""
    return Markup(to_html(text))  # noqa: S704  (sanitized by an allow-list)


@bp.app_template_filter("visible")
def visible(text: str) -> str:
    """Words someone else may have written outside Markdown (a title an agent's first message made,
    a message, a search echoed) with their hidden characters shown as ⟨U+XXXX⟩ (still escaped)."""
    return shown(text)


@bp.app_template_filter("editable")
def editable(text: str) -> str:
    """Such words as the value of a field the person edits and sends back: without the hidden
    characters (a marker would be sent back as text; the characters would turn the field around)."""
    return removed(text)


def own_conversation(conversation_id: int, user: User) -> Conversation:
    """The person's own live conversation; 404 for anyone else's, another tenant's, a deleted one."""
    return conversations.own(conversation_id, user)


def render_messages(messages: list[Message], actor: Actor, oob: bool = False) -> str:
    """Messages as the chat shows them: a turn's messages inside its group (`turn-{run}-{step}`),
    the one its live reply streamed into. With `oob`, every group and line replaces the one with
    its id (static/app.js places a new one), so a turn that also came over the events is shown
    once, whichever arrives first."""
    return render_template("partials/_messages.html", groups=grouped(messages), actor=actor, card_context=card_context, oob=oob)


def grouped(messages: list[Message]) -> list[tuple[str | None, list[Message], int | None]]:
    """Consecutive messages of one pass together, keyed `turn-{run}-{step}`, with the person's
    message a first pass answers; others alone."""
    firsts = {
        run_id: message_id
        for run_id, message_id in db.session.execute(
            sa.select(Run.id, Run.message_id).where(Run.id.in_({m.run_id for m in messages if m.run_id}))
        )
    }
    _mark_agents_words(messages)
    groups: list[tuple[str | None, list[Message], int | None]] = []
    for message in messages:
        key = f"turn-{message.run_id}-{message.step}" if message.run_id is not None else None
        if key is not None and groups and groups[-1][0] == key:
            groups[-1][1].append(message)
        else:
            answers = firsts.get(message.run_id) if message.step == 1 and message.run_id is not None else None
            groups.append((key, [message], answers))
    return groups


def _mark_agents_words(messages: list[Message]) -> None:
    """The person's side of the chat may hold an agent token's words ("Yes, delete post 3"): each
    such message gets `written_by` ("Written by an agent (token 'laptop') through the API"), shown
    under it, so that it never passes for the person's own."""
    said = {m.id: m for m in messages if m.role == "user"}
    if not said:
        return
    runs = sa.select(Run.message_id, Run.via).where(Run.message_id.in_(said), Run.agent.is_(True))
    for message_id, via in db.session.execute(runs):
        if message_id is not None:
            said[message_id].written_by = credential_words("Written", via, agent=True)  # type: ignore[attr-defined]


def messages_after(conversation_id: int, after_id: int) -> list[Message]:
    return list(
        db.session.scalars(
            sa.select(Message).where(Message.conversation_id == conversation_id, Message.id > after_id).order_by(Message.id)
        )
    )


@bp.get("/")
@login_required
def index() -> Any:
    """The person's conversations, newest first; `q` finds those whose title or words hold it.
    For htmx (the search box as the person types), the list alone."""
    actor = current_actor()
    query = request.args.get("q", "")
    found = conversations.listed(actor.user, query)
    if request.htmx:  # type: ignore[attr-defined]
        response = make_response(render_template("partials/_conversations.html", conversations=found, query=query))
        response.headers["Vary"] = "HX-Request"
        return response
    return render_template("chat/index.html", conversations=found, query=query, actor=actor)


@bp.post("/conversations")
@login_required
def new_conversation() -> Any:
    actor = current_actor()
    conversation = Conversation(tenant_id=actor.user.tenant_id, user_id=actor.user.id)
    db.session.add(conversation)
    db.session.commit()
    return redirect(url_for("web.chat", conversation_id=conversation.id))


@bp.get("/c/<id:conversation_id>")
@login_required
def chat(conversation_id: int) -> Any:
    """The chat page; cards past their time are expired first, so the page tells the truth."""
    actor = current_actor()
    conversation = own_conversation(conversation_id, actor.user)
    copilot.expire_due(conversation.id)
    copilot.sweep_dead(current_app.config["TURN_DEAD_AFTER"], conversation.id)
    cursor = events.last_id(conversation.id)  # before the messages: the stream goes on from here
    messages = messages_after(conversation.id, 0)
    return render_template(
        "chat/page.html",
        conversation=conversation,
        groups=grouped(messages),
        conversations=conversations.listed(actor.user, limit=50),
        actor=actor,
        card_context=card_context,
        cursor=cursor,
        running=copilot.active(conversation.id),
    )


@bp.post("/c/<id:conversation_id>/title")
@login_required
def rename(conversation_id: int) -> Any:
    """The person renames the conversation: for htmx, the title block in its new state (and the
    sidebar's link, out of band); without it, back to the chat."""
    actor = current_actor()
    conversation = conversations.rename(own_conversation(conversation_id, actor.user), actor, request.form.get("title"))
    if request.htmx:  # type: ignore[attr-defined]
        response = make_response(render_template("partials/_title.html", conversation=conversation, oob=True))
        response.headers["Vary"] = "HX-Request"
        return response
    return redirect(url_for("web.chat", conversation_id=conversation.id))


@bp.post("/c/<id:conversation_id>/delete")
@login_required
def delete(conversation_id: int) -> Any:
    """The person deletes the conversation (refused while a turn runs); its open cards end
    `cancelled`. Back to the list, which says so."""
    actor = current_actor()
    ended = conversations.delete(own_conversation(conversation_id, actor.user), actor)
    note = f" {len(ended)} waiting card(s) in it were set aside; nothing ran." if ended else ""
    flash(f"Conversation deleted.{note}", "info")
    if request.htmx:  # type: ignore[attr-defined]
        response = make_response("", 204)
        response.headers["HX-Redirect"] = url_for("web.index")
        return response
    return redirect(url_for("web.index"))


@bp.post("/c/<id:conversation_id>/messages")
@login_required
@limit_per_person_and_address("MESSAGES")
def post_message(conversation_id: int) -> Any:
    """The person's message: the reply (and any card) swaps in under the chat. Over the length
    limit it is refused whole, saying the limit (the composer keeps the text to shorten)."""
    actor = current_actor()
    conversation = own_conversation(conversation_id, actor.user)
    text = (request.form.get("text") or "").strip()
    if not text:
        return ("", 204)
    text = check_message(text, current_app.config["MESSAGE_MAX_CHARS"])
    title = conversation.title
    said, run = copilot.send_message(conversation, actor, text)
    response = messages_or_page(said.id - 1, actor, conversation.id, run.id)
    if request.htmx and conversation.title != title:  # type: ignore[attr-defined]
        # its first message titled it: the heading, the sidebar and the tab follow at once
        response.set_data(response.get_data(as_text=True) + render_template("partials/_titles.html", conversation=conversation))
    return response


def messages_or_page(after_id: int, actor: Actor, conversation_id: int, run_id: int | None) -> Any:
    """For htmx, what is new since after_id (the person's message; a turn's reply once it has
    ended — until then it streams in over the events). Without htmx (no script, no stream), the
    chat page once the turn ends or TURN_WAIT passes."""
    if request.htmx:  # type: ignore[attr-defined]
        added = messages_after(conversation_id, after_id)
        response = make_response(render_messages(added, actor, oob=True) + _working(run_id, added))
        response.headers["Vary"] = "HX-Request"
        return response
    if run_id is not None:
        copilot.wait(conversation_id, run_id, events.last_id(conversation_id), current_app.config["TURN_WAIT"])
    return redirect(url_for("web.chat", conversation_id=conversation_id))


def _working(run_id: int | None, added: list[Message]) -> str:
    """The turn's reply, still to come, as its live bubble (working, with Stop) from the moment the
    message is accepted: its worker may take a while to start it. static/app.js never lets it
    replace the turn's bubble or messages that came first over the events."""
    run = db.session.get(Run, run_id) if run_id is not None else None
    if run is None or run.status not in GOING or any(m.run_id == run.id for m in added):
        return ""
    step = run.step + 1
    return render_template("partials/_live.html", run=run.id, step=step, answers=copilot.answers(run, step), waiting=True)


@bp.post("/c/<id:conversation_id>/retry")
@login_required
@limit_per_person_and_address("MESSAGES")  # a retry runs a turn, as a message does
def retry(conversation_id: int) -> Any:
    """Run the failed turn again; the failure note is replaced by its new state and the reply."""
    actor = current_actor()
    conversation = own_conversation(conversation_id, actor.user)
    before = copilot.newest_message_id(conversation.id)
    run = copilot.retry(conversation, actor)
    return messages_or_page(before, actor, conversation.id, run.id if run else None)


@bp.post("/c/<id:conversation_id>/stop")
@login_required
def stop(conversation_id: int) -> Any:
    """Stop the running turn at its next step (its end arrives over the events)."""
    actor = current_actor()
    conversation = own_conversation(conversation_id, actor.user)
    copilot.stop(conversation, actor)
    if request.htmx:  # type: ignore[attr-defined]
        return ("", 204)
    return redirect(url_for("web.chat", conversation_id=conversation.id))


@bp.get("/c/<id:conversation_id>/events")
@login_required
def conversation_events(conversation_id: int) -> Any:
    """The conversation's live events as HTML fragments for htmx's SSE extension: a turn's live
    reply appears, fills in as the model writes, and is replaced by its messages when it ends."""
    actor = current_actor()
    conversation = own_conversation(conversation_id, actor.user)
    live = LiveText(conversation.id)

    def shown(event: Event) -> tuple[str, str] | None:
        html = render_event(event, actor, live)
        return None if html is None else ("message", html)

    return sse.stream(conversation.id, actor.user.id, shown)


class LiveText:
    """One stream's view of the replies being written: each text event shows the whole reply so far,
    rendered again (a partial Markdown text is rendered and sanitized like a whole one, so the page
    never holds half a tag, and never the model's words as HTML; app.markdown.Live keeps the cost
    small). A stream that joins mid-reply (a reconnect) reads the words it missed first."""

    def __init__(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.so_far: dict[tuple[Any, Any], tuple[str, Live]] = {}

    def started(self, run: Any, step: Any) -> None:
        self.so_far[(run, step)] = ("", Live())

    def ended(self, run: Any, step: Any) -> None:
        self.so_far.pop((run, step), None)

    def add(self, event: Event) -> tuple[str, str | None]:
        """The reply so far, and its HTML (None: nothing new worth sending yet)."""
        key = (event.data.get("run"), event.data.get("step"))
        if key not in self.so_far:
            self.so_far[key] = (events.text_before(self.conversation_id, *key, event.id), Live())
        text, renderer = self.so_far[key]
        text += str(event.data.get("text", ""))
        self.so_far[key] = (text, renderer)
        return text, renderer.html(text)


def render_event(event: Event, actor: Actor, live: LiveText) -> str | None:
    """One event of a conversation as the HTML fragment htmx's SSE extension swaps in (None: none)."""
    run, step = event.data.get("run"), event.data.get("step")
    if event.type == "text":
        _, html = live.add(event)
        if html is None:
            return None
        return render_template("partials/_live_text.html", run=run, step=step, html=Markup(html))  # noqa: S704  (sanitized)
    if event.type == "approval":
        return card_event(event, actor, live.conversation_id) or ""
    if event.type == "title":
        conversation = db.session.get(Conversation, live.conversation_id)
        return render_template("partials/_titles.html", conversation=conversation) if conversation else ""
    answers = event.data.get("answers")
    if event.type == "turn" and event.data.get("state") == "started":
        live.started(run, step)
        reply = render_template("partials/_live.html", run=run, step=step, answers=answers)
        return _asked(answers, live.conversation_id, actor) + reply
    if event.type == "turn":
        live.ended(run, step)
        ids = [int(i) for i in event.data.get("messages", [])]
        messages = list(db.session.scalars(sa.select(Message).where(Message.id.in_(ids)).order_by(Message.id)))
        return render_template(
            "partials/_turn.html",
            key=f"turn-{run}-{step}",
            messages=messages,
            actor=actor,
            card_context=card_context,
            oob=True,
            answers=answers,
        )
    return ""


def card_event(event: Event, actor: Actor, conversation_id: int) -> str | None:
    """A card's change of status (approvals.move publishes one, whoever decided, on any channel
    or process) as the card in its new state FOR THIS VIEWER, swapped out of band for the one on
    the page: no token and no buttons unless this viewer may still answer it."""
    approval = db.session.get(Approval, str(event.data.get("id", "")))
    if approval is None or approval.conversation_id != conversation_id:
        return None
    context = card_context(approval, actor)
    context["oob"] = True
    html = render_partial(approval, context)
    # An edit or a refresh made a fresh card in its place: it follows, placed after it (app.js).
    fresh = db.session.scalar(
        sa.select(Approval).where(Approval.replaces == approval.id, Approval.conversation_id == conversation_id).limit(1)
    )
    if fresh is not None:
        fresh_context = card_context(fresh, actor)
        fresh_context["oob"] = True
        html += render_partial(fresh, fresh_context)
    return html


def _asked(message_id: Any, conversation_id: int, actor: Actor) -> str:
    """The message a turn that starts answers, placed before its reply: written elsewhere (an
    agent token, an app, another tab), it is not on this page yet; where it is, it replaces
    itself (app.js places each id once)."""
    said = db.session.get(Message, int(message_id)) if str(message_id or "").isdigit() else None
    if said is None or said.conversation_id != conversation_id or said.role != "user":
        return ""
    _mark_agents_words([said])
    return render_template("partials/_message.html", message=said, actor=actor, card_context=card_context, oob=True)


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
        response = make_response(render_partial(approval, card_context(approval, actor)))
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
        if event.type != "approval" or event.data.get("id") != approval_id:
            return None
        html = card_event(event, actor, conversation_id)
        return None if html is None else ("message", html)

    return sse.stream(conversation_id, actor.user.id, shown)


def _own_approval(approval_id: str, actor: Actor) -> Approval:
    """The card, for its person — or, for a card that needs a countersignature, for a second
    person its rule allows (or who gave that signature); 404 outside the tenant, 403 else."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != actor.user.tenant_id:
        raise NotFound()
    if approval.user_id != actor.user.id and not _second_person(approval, actor):
        raise WrongPerson()
    return approval


def _second_person(approval: Approval, actor: Actor) -> bool:
    if not approval.countersign:
        return False
    return approval.decided_by == actor.user.id or may_countersign(approval, actor.user, copilot.engine().registry)


@bp.post("/approvals/<approval_id>/countersign", defaults={"decision": "countersign"}, endpoint="countersign")
@bp.post("/approvals/<approval_id>/countersign/decline", defaults={"decision": "decline"}, endpoint="countersign_decline")
@login_required
@limit_per_person_and_address("ANSWERS")
def countersign(approval_id: str, decision: str) -> Any:
    """The second signature (or a decline) by a signed-in person of the tenant whom the card's
    rule allows, with the countersignature token their page was given (CSRF-checked like every
    POST): the card in its new state; without htmx, its page."""
    actor = current_actor()
    token = request.form.get("token", "")
    try:  # a reason too long is refused whole (revise.reason), never cut
        approval = copilot.countersign(approval_id, token, actor, decision, request.form.get("reason"))
    except CountersignError as error:
        current = db.session.get(Approval, approval_id)
        if current is None or current.tenant_id != actor.user.tenant_id or isinstance(error, NotFound):
            raise
        if current.user_id != actor.user.id and not _second_person(current, actor):
            raise  # someone the rule does not allow sees the error, never the card
        db.session.refresh(current)
        approval, context, status = current, card_context(current, actor, error.message), error.status
    else:
        context, status = card_context(approval, actor), 200
    if not request.htmx:  # type: ignore[attr-defined]
        if status == 200:
            return redirect(url_for("web.approval_page", approval_id=approval.id))
        return render_template("approvals/page.html", actor=actor, approval=approval, ctx=context), status
    response = make_response(render_partial(approval, context), status)
    response.headers["Vary"] = "HX-Request"
    return response


@bp.post("/approvals/<approval_id>/<any(confirm, decline, cancel, submit):decision>")
@login_required
@limit_per_person_and_address("ANSWERS")
def answer(approval_id: str, decision: str) -> Any:
    """Confirm or Decline: returns the same card in its new state, then the model's reply."""
    actor = current_actor()
    token = request.form.get("token", "")
    try:
        values = submitted_values(approval_id) if decision == "submit" else None
        reason = request.form.get("reason") if decision == "decline" else None
        approval = copilot.answer(approval_id, token, actor, decision, values, reason)
    except CountersignError as error:
        current = db.session.get(Approval, approval_id)
        if current is None or current.user_id != actor.user.id:
            raise
        approval = current
        db.session.refresh(approval)
        fields = error.fields if isinstance(error, FormInvalid) else None
        typed = request.form if fields is not None else None
        context = card_context(approval, actor, error.message, typed=typed, field_errors=fields)
        context["reason"] = request.form.get("reason", "")  # kept for another try (too long, say)
        body = render_partial(approval, context)
        added = []
        status = error.status
    else:
        # The card's final state now; the model's continuation streams in under it (or is here
        # already, when it ran inline).
        body = render_partial(approval, card_context(approval, actor))
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


@bp.post("/approvals/<approval_id>/<any(edit, refresh):decision>")
@login_required
@limit_per_person_and_address("ANSWERS")
def revise(approval_id: str, decision: str) -> Any:
    """Edit a pending card, or ask a changed card afresh: the card in its new state followed by
    the fresh card (both replace the old card's fragment), which the person then confirms."""
    actor = current_actor()
    token = request.form.get("token", "")
    values = {k: v for k, v in request.form.items() if k not in ("token", "csrf_token")} if decision == "edit" else None
    try:
        fresh = copilot.answer(approval_id, token, actor, decision, values)
    except CountersignError as error:
        old = db.session.get(Approval, approval_id)
        if old is None or old.user_id != actor.user.id:
            raise
        db.session.refresh(old)
        context = card_context(old, actor, error.message)
        if decision == "edit":
            edit_errors(context, request.form, error.fields if isinstance(error, FormInvalid) else {})
        response = make_response(render_partial(old, context), error.status)
        response.headers["Vary"] = "HX-Request"
        return response
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect(url_for("web.chat", conversation_id=fresh.conversation_id))
    old = db.session.get(Approval, approval_id)
    assert old is not None
    db.session.refresh(old)
    body = render_partial(old, card_context(old, actor)) + render_partial(fresh, card_context(fresh, actor))
    response = make_response(body, 200)
    response.headers["Vary"] = "HX-Request"
    return response
