"""The demo's own records (posts, an outbox) and the benchmarks' one-INSERT table."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.models._base import Model, UTCDateTime, utcnow
from app.models._people import User


class Post(Model):
    __tablename__ = "posts"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    author_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    title: Mapped[str] = mapped_column(sa.String(300))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    status: Mapped[str] = mapped_column(sa.String(20), default="draft")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    author: Mapped[User] = relationship()


class OutboxEmail(Model):
    """An email the send_email action queued; the approval id makes sending idempotent."""

    __tablename__ = "outbox"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    sender_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    to: Mapped[str] = mapped_column(sa.String(320))
    subject: Mapped[str] = mapped_column(sa.String(300))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    status: Mapped[str] = mapped_column(sa.String(20), default="queued")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProbeRow(Model):
    """The one-INSERT endpoint's table, used only by bench/ as a baseline."""

    __tablename__ = "probe_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
