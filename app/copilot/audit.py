"""The audit log: one row per decision and per refused attempt. Never a value."""

from __future__ import annotations

from typing import Any

from app.extensions import db
from app.models import AuditEvent


def record(
    event: str,
    outcome: str,
    *,
    tenant_id: int | None,
    user_id: int | None,
    approval_id: str | None = None,
    detail: str = "",
    channel: str = "",
) -> AuditEvent:
    """Add an audit row to the current transaction (the caller commits)."""
    row = AuditEvent(
        event=event,
        outcome=outcome,
        tenant_id=tenant_id,
        user_id=user_id,
        approval_id=approval_id,
        detail=detail[:500],
        channel=channel,
    )
    db.session.add(row)
    return row


def record_now(event: str, outcome: str, **fields: Any) -> None:
    """Record and commit at once, in a transaction of its own; for refused attempts,
    which must be kept even when the request that made them fails."""
    db.session.rollback()
    record(event, outcome, **fields)
    db.session.commit()
