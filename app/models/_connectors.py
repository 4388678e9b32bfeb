"""Chat connectors: a person's linked identities and their threads' conversations."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.models._base import Model
from app.models._people import User


class ConnectorIdentity(Model):
    """A person's identity on a chat connector (a Slack or Telegram user id, an email address)."""

    __tablename__ = "connector_identities"
    __table_args__ = (sa.UniqueConstraint("connector", "external_id", name="uq_connector_identities_external"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    external_id: Mapped[str] = mapped_column(sa.String(320))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)

    user: Mapped[User] = relationship()


class ConnectorThread(Model):
    """A chat thread's conversation, per person; `address` is where replies go (email)."""

    __tablename__ = "connector_threads"
    __table_args__ = (sa.UniqueConstraint("connector", "thread_key", "user_id", name="uq_connector_threads_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    thread_key: Mapped[str] = mapped_column(sa.String(500))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"))
    address: Mapped[str] = mapped_column(sa.String(320), default="")
    subject: Mapped[str] = mapped_column(sa.String(300), default="")
