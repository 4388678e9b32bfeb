"""Chat connectors: a person's linked identities, the one-time codes that link them, and their
threads' conversations."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.models._base import Model, UTCDateTime, utcnow
from app.models._people import User
from app.status import CardsTo


class ConnectorIdentity(Model):
    """A person's identity on a chat connector (a Slack or Telegram user id, an email address)."""

    __tablename__ = "connector_identities"
    __table_args__ = (
        sa.UniqueConstraint("connector", "external_id", name="uq_connector_identities_external"),
        sa.CheckConstraint(sa.column("cards").in_([c.value for c in CardsTo]), name="ck_connector_identities_cards"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    external_id: Mapped[str] = mapped_column(sa.String(320))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    # Which cards reach this account outside a thread (app.connectors.push): "agents" (asked by an
    # agent: over MCP, or with an agent token), "all", "off"; None: the default (a person's first
    # linked chat account gets agents' cards, the others none).
    cards: Mapped[str | None] = mapped_column(sa.String(10), nullable=True)

    user: Mapped[User] = relationship()


class ConnectorThread(Model):
    """A chat thread's conversation, per person; `address` is where replies go (email)."""

    __tablename__ = "connector_threads"
    __table_args__ = (
        sa.UniqueConstraint("connector", "thread_key", "user_id", name="uq_connector_threads_key"),
        # Every turn's end asks whether its conversation has a thread to post to (most have none).
        sa.Index("ix_connector_threads_conversation", "conversation_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    thread_key: Mapped[str] = mapped_column(sa.String(500))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"))
    address: Mapped[str] = mapped_column(sa.String(320), default="")
    subject: Mapped[str] = mapped_column(sa.String(300), default="")


class LinkCode(Model):
    """A one-time code a person carries from their settings page to a chat service (or a link mailed
    to an address) to link that account to theirs (app.auth.links). Only its hash is kept. A chat
    account that sends it is recorded as `claimed_by`; nothing is linked until the person confirms
    that account on the page (`used_at`), or, for email, opens the mailed link signed in."""

    __tablename__ = "link_codes"
    id: Mapped[int] = mapped_column(primary_key=True)
    code_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    address: Mapped[str] = mapped_column(sa.String(320), default="")  # the email address it confirms
    claimed_by: Mapped[str] = mapped_column(sa.String(320), default="")  # the chat account that sent it
    claimed_name: Mapped[str] = mapped_column(sa.String(200), default="")  # that account's name, as the service gave it
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    user: Mapped[User] = relationship()
