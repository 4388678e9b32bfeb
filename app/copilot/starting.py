"""Where a conversation is made: one function for every channel (web, API, connectors, the kit),
and a channel's own conversation (MCP's) found again by its key, never by its title. Below the
turns and the conversations' management, so both can use it."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import Conversation, User

__all__ = ["for_channel", "start"]


def start(user: User, title: str | None = None, channel_key: str | None = None) -> Conversation:
    """A new conversation of the person's (flushed, not committed): the one place one is made."""
    conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id, channel_key=channel_key)
    if title is not None:
        conversation.title = title
    db.session.add(conversation)
    db.session.flush()
    return conversation


def for_channel(user: User, channel_key: str, title: str) -> Conversation:
    """The person's conversation for a channel's own calls (MCP's), found by its key, never by
    its title (renaming any conversation never moves where calls land); started on first use,
    and again after the person deleted it. Started, it is committed at once, alone: two first
    calls at the same moment both find none, and the second's is refused by the key's unique
    index (IntegrityError), so it takes the first's (a helper's attack: 1 call in 8 answered
    "Internal server error")."""
    found = _find(user, channel_key)
    if found is not None:
        return found
    try:
        conversation = start(user, title, channel_key)
        db.session.commit()
        return conversation
    except sa.exc.IntegrityError:
        db.session.rollback()
        theirs = _find(user, channel_key)  # (the other call's, committed)
        if theirs is None:
            raise
        return theirs


def _find(user: User, channel_key: str) -> Conversation | None:
    mine = sa.select(Conversation).where(Conversation.user_id == user.id, Conversation.channel_key == channel_key)
    return db.session.scalar(mine)
