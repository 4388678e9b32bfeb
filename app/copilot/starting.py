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
    and again after the person deleted it."""
    found = db.session.scalar(
        sa.select(Conversation).where(Conversation.user_id == user.id, Conversation.channel_key == channel_key)
    )
    return found if found is not None else start(user, title, channel_key)
