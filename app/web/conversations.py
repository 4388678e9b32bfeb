"""The person's conversations: the list and its search, a new one, the chat page, rename, delete,
and a turn's start (a message, a retry) and stop."""

from __future__ import annotations

from typing import Any

from flask import current_app, flash, make_response, redirect, render_template, request, url_for
from flask_login import login_required

from app import copilot
from app.auth import current_actor
from app.copilot import conversations, events
from app.copilot.approvals import Actor
from app.copilot.text import check_message
from app.extensions import db, limit_per_person_and_address
from app.models import Message, Run
from app.status import GOING
from app.web.blueprint import bp
from app.web.cards import card_context
from app.web.messages import grouped, messages_after, own_conversation, render_messages


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
    conversation = conversations.start(actor.user)
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
