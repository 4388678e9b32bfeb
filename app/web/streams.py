"""A conversation's live events as HTML fragments for htmx's SSE extension: a reply as the model
writes it, a turn's messages when it ends, a card's new state, a new title."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import render_template
from flask_login import login_required
from markupsafe import Markup

from app import sse
from app.auth import current_actor
from app.copilot import conversations, events
from app.copilot.approvals import Actor
from app.copilot.events import Event
from app.extensions import db
from app.markdown import Live
from app.models import Approval, Conversation, Message, Run
from app.status import EventType, Role, TurnState
from app.web.blueprint import bp
from app.web.cards import card_context, render_partial
from app.web.messages import mark_agents_words, own_conversation


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

    def knows(self, run: Any, step: Any) -> bool:
        """Whether this stream has seen the reply's start or words already."""
        return (run, step) in self.so_far

    def add(self, event: Event) -> tuple[str, str | None]:
        """The reply so far, and its HTML (None: nothing new worth sending yet)."""
        key = (event.data.get("run"), event.data.get("step"))
        whole = bool(event.data.get("whole"))  # (the whole reply so far: after words Redis was away for)
        if key not in self.so_far:
            self.so_far[key] = ("" if whole else events.text_before(self.conversation_id, *key, event.id), Live())
        text, renderer = self.so_far[key]
        text = str(event.data.get("text", "")) if whole else text + str(event.data.get("text", ""))
        self.so_far[key] = (text, renderer)
        return text, renderer.html(text)


def render_event(event: Event, actor: Actor, live: LiveText) -> str | None:
    """One event of a conversation as the HTML fragment htmx's SSE extension swaps in (None: none)."""
    run, step = event.data.get("run"), event.data.get("step")
    if event.type == EventType.TEXT:
        # (its start not seen here: its place comes first, see _joined_bubble)
        bubble = "" if live.knows(run, step) else _joined_bubble(run, step, live.conversation_id)
        _, html = live.add(event)
        if html is None:
            return bubble or None
        return bubble + render_template("partials/_live_text.html", run=run, step=step, html=Markup(html))  # noqa: S704  (sanitized)
    if event.type == EventType.APPROVAL:
        return card_event(event, actor, live.conversation_id) or ""
    if event.type == EventType.TITLE:
        conversation = db.session.get(Conversation, live.conversation_id)
        return render_template("partials/_titles.html", conversation=conversation) if conversation else ""
    answers = event.data.get("answers")
    if event.type == EventType.TURN and event.data.get("state") == TurnState.STARTED:
        live.started(run, step)
        reply = render_template("partials/_live.html", run=run, step=step, answers=answers)
        return _asked(answers, live.conversation_id, actor) + reply
    if event.type == EventType.TURN:
        live.ended(run, step)
        messages = conversations.messages(live.conversation_id, event.data.get("messages", []))
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
    html = render_partial(context)
    # An edit or a refresh made a fresh card in its place: it follows, placed after it (app.js).
    fresh = db.session.scalar(
        sa.select(Approval).where(Approval.replaces == approval.id, Approval.conversation_id == conversation_id).limit(1)
    )
    if fresh is not None:
        fresh_context = card_context(fresh, actor)
        fresh_context["oob"] = True
        html += render_partial(fresh_context)
    return html


def _asked(message_id: Any, conversation_id: int, actor: Actor) -> str:
    """The message a turn that starts answers, placed before its reply: written elsewhere (an
    agent token, an app, another tab), it is not on this page yet; where it is, it replaces
    itself (app.js places each id once)."""
    said = db.session.get(Message, int(message_id)) if str(message_id or "").isdigit() else None
    if said is None or said.conversation_id != conversation_id or said.role != Role.USER:
        return ""
    mark_agents_words([said])
    return render_template("partials/_message.html", message=said, actor=actor, card_context=card_context, oob=True)


def _joined_bubble(run: Any, step: Any, conversation_id: int) -> str:
    """A reply's live bubble, for a stream whose first event of it is words: its start is not in
    the stream (Redis came back empty since, or the reply outgrew the stream's length), and a page
    opened since has no bubble for them (nor Stop). A page that has one keeps it (static/app.js)."""
    answers = None
    if step == 1 and str(run).isdigit():  # (a first reply goes under the message it answers)
        answers = db.session.scalar(sa.select(Run.message_id).where(Run.id == int(run), Run.conversation_id == conversation_id))
    return render_template("partials/_live.html", run=run, step=step, answers=answers)
