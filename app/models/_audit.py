"""The audit log's rows, its chains' heads and how far each chain was verified."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.models._base import Model, UTCDateTime, utcnow


class AuditEvent(Model):
    """One decision or refused attempt. Never holds a form value or a secret.
    Rows chain per tenant: `hash` is an HMAC, with the audit key named by `key_id`, over the
    previous row's hash and this row's content (app/copilot/audit.py)."""

    __tablename__ = "audit_events"
    __table_args__ = (sa.UniqueConstraint("chain", "seq", name="uq_audit_events_chain_seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    chain: Mapped[int] = mapped_column(default=0)  # the tenant's id, 0 for none
    seq: Mapped[int] = mapped_column(default=0)
    prev_hash: Mapped[str] = mapped_column(sa.String(64), default="")
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")  # which audit key made `hash`
    tenant_id: Mapped[int | None] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    user_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id"))
    approval_id: Mapped[str | None] = mapped_column(sa.String(32), index=True)
    event: Mapped[str] = mapped_column(sa.String(40))  # e.g. approval.created, approval.confirm
    outcome: Mapped[str] = mapped_column(sa.String(40))  # done, declined, refused_attempt, ...
    detail: Mapped[str] = mapped_column(sa.Text, default="")
    channel: Mapped[str] = mapped_column(sa.String(40), default="")  # web, api, cli
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditHead(Model):
    """The last link of each tenant's audit chain; updating it first serializes writers.
    `mac` (keyed) covers chain, seq and hash, so the head cannot be moved to a point of one's choosing."""

    __tablename__ = "audit_heads"
    chain: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(default=0)
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")
    mac: Mapped[str] = mapped_column(sa.String(64), default="")


class AuditMark(Model):
    """How far a chain was last verified (seq, hash) and where the round of re-checking older rows
    stands (`swept`), keyed like the head, so the admin page verifies only what is new."""

    __tablename__ = "audit_marks"
    chain: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(default=0)
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    swept: Mapped[int] = mapped_column(default=0)
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")
    mac: Mapped[str] = mapped_column(sa.String(64), default="")
