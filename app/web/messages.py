"""The chat's messages as the page shows them: grouped by the turn that wrote them, with an agent's
words marked; and the person's own conversation they are read from."""

from __future__ import annotations

import sqlalchemy as sa
from flask import render_template

from app.auth import credential_words
from app.copilot import conversations
from app.copilot.approvals import Actor
from app.extensions import db
from app.models import Conversation, Message, Run, User
from app.status import Role
from app.web.cards import card_context


def own_conversation(conversation_id: int, user: User) -> Conversation:
    """The person's own live conversation; 404 for anyone else's, another tenant's, a deleted one."""
    return conversations.own(conversation_id, user)


Group = tuple[str | None, list[Message], int | None]  # (turn key, its messages, the message it answers)


def render_messages(messages: list[Message], actor: Actor, oob: bool = False) -> str:
    """Messages as the chat shows them: a turn's messages inside its group (`turn-{run}-{step}`),
    the one its live reply streamed into. With `oob`, every group and line replaces the one with
    its id (static/app.js places a new one), so a turn that also came over the events is shown
    once, whichever arrives first."""
    return render_template("partials/_messages.html", groups=grouped(messages), actor=actor, card_context=card_context, oob=oob)


def grouped(messages: list[Message]) -> list[Group]:
    """Consecutive messages of one pass together, keyed `turn-{run}-{step}`, with the person's
    message a first pass answers; others alone."""
    firsts = {
        run_id: message_id
        for run_id, message_id in db.session.execute(
            sa.select(Run.id, Run.message_id).where(Run.id.in_({m.run_id for m in messages if m.run_id}))
        )
    }
    mark_agents_words(messages)
    groups: list[Group] = []
    for message in messages:
        key = f"turn-{message.run_id}-{message.step}" if message.run_id is not None else None
        if key is not None and groups and groups[-1][0] == key:
            groups[-1][1].append(message)
        else:
            answers = firsts.get(message.run_id) if message.step == 1 and message.run_id is not None else None
            groups.append((key, [message], answers))
    return _after_what_they_answer(groups)


def _after_what_they_answer(groups: list[Group]) -> list[Group]:
    """Each pass's first group right after the person's message it answers (when that message is
    among them), as the page places it live (static/app.js), not where its writing put it: the
    person may have written again before it came, and a reload must read as the page did."""
    shown = {message.id for _, messages, _ in groups for message in messages}
    following: dict[int, list[Group]] = {}
    for group in groups:
        _, messages, answers = group
        if answers is not None and answers in shown and all(m.id != answers for m in messages):
            following.setdefault(answers, []).append(group)
    moved = {id(group) for placed in following.values() for group in placed}
    ordered: list[Group] = []

    def place(group: Group) -> None:
        ordered.append(group)
        for message in group[1]:
            for after in following.pop(message.id, []):
                place(after)

    for group in groups:
        if id(group) not in moved:
            place(group)
    ordered.extend(group for left in following.values() for group in left)  # (none is ever dropped)
    return ordered


def mark_agents_words(messages: list[Message]) -> None:
    """The person's side of the chat may hold an agent token's words ("Yes, delete post 3"): each
    such message gets `written_by` ("Written by an agent (token 'laptop') through the API"), shown
    under it, so that it never passes for the person's own."""
    said = {m.id: m for m in messages if m.role == Role.USER}
    if not said:
        return
    conversations = {m.conversation_id for m in said.values()}  # (its runs by index, not every run ever kept)
    runs = sa.select(Run.message_id, Run.via).where(
        Run.conversation_id.in_(conversations), Run.message_id.in_(said), Run.agent.is_(True)
    )
    for message_id, via in db.session.execute(runs):
        if message_id is not None:
            said[message_id].written_by = credential_words("Written", via, agent=True)  # type: ignore[attr-defined]


def messages_after(conversation_id: int, after_id: int) -> list[Message]:
    return list(
        db.session.scalars(
            sa.select(Message).where(Message.conversation_id == conversation_id, Message.id > after_id).order_by(Message.id)
        )
    )
