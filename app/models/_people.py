"""Tenants, people, their API tokens and browser sessions."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from flask_login import UserMixin
from sqlalchemy.orm import Mapped, mapped_column, relationship
from werkzeug.security import check_password_hash

from app.models._base import Model, UTCDateTime, utcnow


class Tenant(Model):
    __tablename__ = "tenants"
    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(sa.String(64), unique=True)
    name: Mapped[str] = mapped_column(sa.String(200))


class User(UserMixin, Model):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    email: Mapped[str] = mapped_column(sa.String(320), unique=True)
    name: Mapped[str] = mapped_column(sa.String(200), default="")
    password_hash: Mapped[str] = mapped_column(sa.String(256), default="")
    is_admin: Mapped[bool] = mapped_column(default=False)

    tenant: Mapped[Tenant] = relationship()

    def check_password(self, password: str) -> bool:
        return bool(self.password_hash) and check_password_hash(self.password_hash, password)


class ApiToken(Model):
    """A personal access token; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(200), default="")
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    # The toolsets this token reaches on every route, API chat and MCP ("" = the app's COUNTERSIGN_TOOLSETS).
    toolsets: Mapped[str] = mapped_column(sa.String(500), default="", server_default="")
    # "agent" (the default: chats and calls actions, never answers a card or a form, never sees a
    # card's token) or "client" (the person's own app: may answer, like the browser).
    scope: Mapped[str] = mapped_column(sa.String(10), default="agent", server_default="agent")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked: Mapped[bool] = mapped_column(default=False)

    user: Mapped[User] = relationship()

    @property
    def is_agent(self) -> bool:
        """Anything but an explicit client token acts for an agent (fail closed)."""
        return self.scope != "client"


class UserSession(Model):
    """A browser sign-in. The cookie's `sid` is this row's id (and card tokens' "web:<sid>"
    binding); a cookie counts only while its row is live, so signing out ends it everywhere."""

    __tablename__ = "user_sessions"
    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
