"""A person's conversations: found only by their own person (another person's, another tenant's
and a deleted one are all NotFound), renamed, deleted, searched."""

from __future__ import annotations

import re

import sqlalchemy as sa

from app.copilot import approvals, audit, events, turns
from app.copilot.approvals import Actor
from app.copilot.starting import for_channel as for_channel  # (re-exported: made in one place)
from app.copilot.starting import start as start
from app.copilot.text import text_problem
from app.errors import AgentCannotManage, BadValues, ConversationBusy, NotFound
from app.extensions import db, won
from app.models import Approval, Conversation, Message, Run, User, utcnow
from app.status import GOING, Role, RunStatus, Status

TITLE_MAX = 200  # the column's length
QUERY_MAX = 200
_SPACES = re.compile(r"\s+")
# A card still open when its conversation is deleted is ended as `cancelled`: the person set it
# aside (nothing ran), which is what "Not now" says too; `revoked` would name an admin, and
# `declined` a no they never gave. The audit row's detail says why.
DELETED_DETAIL = "conversation deleted"
OPEN = (Status.PENDING, Status.COUNTERSIGNING)


def own(conversation_id: int, user: User) -> Conversation:
    """The person's conversation; NotFound for another person's, another tenant's, a deleted one
    or none (they all look the same to the caller)."""
    conversation = db.session.get(Conversation, conversation_id)
    if (
        conversation is None
        or conversation.user_id != user.id
        or conversation.tenant_id != user.tenant_id
        or conversation.deleted_at is not None
    ):
        raise NotFound()
    return conversation


def messages(conversation_id: int, ids: list[int]) -> list[Message]:
    """These messages of the conversation, oldest first (a turn's end names the ones it wrote;
    every open view reads them): one statement, built once. An id of another conversation's is
    left out, whatever the event that named it (an event outlives a database restored to before
    it, and row ids can be given again)."""
    return list(db.session.scalars(_MESSAGES, {"conversation_id": conversation_id, "ids": [int(i) for i in ids]}))


_MESSAGES = (
    sa.select(Message)
    .where(Message.conversation_id == sa.bindparam("conversation_id"), Message.id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(Message.id)
)


def like_pattern(text: str) -> str:
    """`text` as a LIKE pattern that matches it literally anywhere (escape character: backslash)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def listed(user: User, query: str = "", limit: int = 100) -> list[Conversation]:
    """The person's conversations, newest first; with `query`, those whose title or whose words
    (the person's and the model's) hold it, case-insensitively (on SQLite: ASCII letters only)."""
    select = sa.select(Conversation).where(
        Conversation.user_id == user.id, Conversation.tenant_id == user.tenant_id, Conversation.deleted_at.is_(None)
    )
    query = query.strip()[:QUERY_MAX]
    if query:
        pattern = like_pattern(query.lower())
        said = sa.exists().where(
            Message.conversation_id == Conversation.id,
            Message.role.in_((Role.USER, Role.ASSISTANT)),
            sa.func.lower(Message.text).like(pattern, escape="\\"),
        )
        select = select.where(sa.or_(sa.func.lower(Conversation.title).like(pattern, escape="\\"), said))
    return list(db.session.scalars(select.order_by(Conversation.id.desc()).limit(limit)))


def clean_title(title: object) -> str:
    """A title as it is stored: one line, trimmed; BadValues when empty, too long or unstorable."""
    if not isinstance(title, str):
        raise BadValues("`title` must be a string.")
    title = _SPACES.sub(" ", title).strip()
    if not title:
        raise BadValues("A title needs at least one character.")
    if len(title) > TITLE_MAX:
        raise BadValues(f"Titles are limited to {TITLE_MAX} characters; this one has {len(title)}.")
    problem = text_problem(title)
    if problem:
        raise BadValues(problem)
    return title


def rename(conversation: Conversation, actor: Actor, title: object) -> Conversation:
    """The person names their conversation (an agent credential may not: the sidebar is theirs)."""
    if actor.agent:
        raise AgentCannotManage()
    conversation.title = clean_title(title)
    db.session.commit()
    events.retitled(conversation.id)
    return conversation


def delete(conversation: Conversation, actor: Actor) -> list[Approval]:
    """Delete the person's conversation: hidden from every route from now on, its open cards ended
    `cancelled` (audited; nothing runs), its paused turns stopped. Refused (ConversationBusy) while
    a turn is queued or running or a card's action runs, so nothing writes into it afterwards.
    Returns the cards it ended."""
    if actor.agent:
        raise AgentCannotManage()  # ending cards is answering them, which an agent never does
    turns.hold_live(conversation.id)  # a turn being queued now commits first, and is seen below
    going = sa.exists().where(Run.conversation_id == conversation.id, Run.status.in_(GOING))
    running = sa.exists().where(Approval.conversation_id == conversation.id, Approval.status == Status.RUNNING)
    if not won(
        sa.update(Conversation)
        .where(Conversation.id == conversation.id, Conversation.deleted_at.is_(None), ~going, ~running)
        .values(deleted_at=utcnow(), channel_key=None)  # (a channel's next call starts a new one)
    ):
        db.session.rollback()
        db.session.refresh(conversation)
        if conversation.deleted_at is not None:
            raise NotFound()
        raise ConversationBusy()
    audit.record(
        "conversation.deleted",
        "deleted",
        tenant_id=conversation.tenant_id,
        user_id=actor.user.id,
        detail=f"conversation {conversation.id}",
        channel=actor.channel,
    )
    db.session.commit()
    ended = []
    open_cards = sa.select(Approval).where(Approval.conversation_id == conversation.id, Approval.status.in_(OPEN))
    for approval in list(db.session.scalars(open_cards)):
        if approvals.cancel(approval, actor, DELETED_DETAIL):
            ended.append(approval)
    paused = sa.update(Run).where(Run.conversation_id == conversation.id, Run.status == RunStatus.PAUSED)
    db.session.execute(paused.values(status=RunStatus.STOPPED))
    db.session.commit()
    return ended
