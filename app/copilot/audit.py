"""The audit log: one row per decision and per refused attempt, never a value. Rows form a
hash chain per tenant, so an edited, removed or reordered row is found by `verify()`."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from app.extensions import db
from app.models import AuditEvent, AuditHead, utcnow


def canonical(row: AuditEvent) -> str:
    """The row's content as hashed: every field but id and the hashes, in a fixed form."""
    created: datetime = row.created_at
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    content = {
        "chain": row.chain, "seq": row.seq, "tenant_id": row.tenant_id, "user_id": row.user_id,
        "approval_id": row.approval_id, "event": row.event, "outcome": row.outcome,
        "detail": row.detail, "channel": row.channel, "created_at": created.astimezone(UTC).isoformat(),
    }
    return json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def link(prev_hash: str, row: AuditEvent) -> str:
    return hashlib.sha256((prev_hash + canonical(row)).encode()).hexdigest()


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
    """Add an audit row, chained to its tenant's last one, to the current transaction.
    Taking the chain's head row first makes concurrent writers of one tenant wait their turn."""
    chain = tenant_id or 0
    head = _take_head(chain)
    row = AuditEvent(
        event=event, outcome=outcome, tenant_id=tenant_id, user_id=user_id, approval_id=approval_id,
        detail=detail[:500], channel=channel, created_at=utcnow(), chain=chain, seq=head.seq + 1,
        prev_hash=head.hash,
    )
    row.hash = link(head.hash, row)
    db.session.add(row)
    db.session.execute(
        sa.update(AuditHead).where(AuditHead.chain == chain).values(seq=row.seq, hash=row.hash)
    )
    return row


def _take_head(chain: int) -> AuditHead:
    """Lock and read the chain's head (created on first use)."""
    bumped = db.session.execute(
        sa.update(AuditHead).where(AuditHead.chain == chain).values(seq=AuditHead.seq)
        .returning(AuditHead.seq, AuditHead.hash)
    ).first()
    if bumped is None:
        insert = postgresql.insert if db.session.get_bind().dialect.name == "postgresql" else sqlite.insert
        db.session.execute(insert(AuditHead).values(chain=chain, seq=0, hash="").on_conflict_do_nothing())
        return _take_head(chain)
    return AuditHead(chain=chain, seq=bumped[0], hash=bumped[1])


def record_now(event: str, outcome: str, **fields: Any) -> None:
    """Record and commit at once, in a transaction of its own; for refused attempts,
    which must be kept even when the request that made them fails."""
    db.session.rollback()
    record(event, outcome, **fields)
    db.session.commit()


@dataclass(frozen=True)
class Verdict:
    ok: bool
    rows: int
    broken_id: int | None = None
    reason: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"audit chain verifies: {self.rows} rows"
        return f"audit chain broken at row {self.broken_id}: {self.reason}"


def verify(chain: int | None = None, batch: int = 5000) -> Verdict:
    """Walk the chain(s) in order and name the first row whose link does not hold."""
    chains = [chain] if chain is not None else list(db.session.scalars(
        sa.select(AuditEvent.chain).distinct().order_by(AuditEvent.chain)))
    total = 0
    for key in chains:
        prev, expected_seq, last_id = "", 1, 0
        while True:
            rows = db.session.scalars(
                sa.select(AuditEvent).where(AuditEvent.chain == key, AuditEvent.seq >= expected_seq)
                .order_by(AuditEvent.seq).limit(batch)
            ).all()
            if not rows:
                break
            for row in rows:
                total += 1
                if row.seq != expected_seq:
                    return Verdict(False, total, row.id, f"sequence {row.seq}, expected {expected_seq} "
                                   "(a row was removed or inserted)")
                if row.prev_hash != prev:
                    return Verdict(False, total, row.id, "does not link to the row before it")
                if link(prev, row) != row.hash:
                    return Verdict(False, total, row.id, "its content was changed")
                prev, expected_seq, last_id = row.hash, expected_seq + 1, row.id
            db.session.expunge_all()
        head = db.session.get(AuditHead, key)
        if head is not None and (head.seq != expected_seq - 1 or head.hash != prev):
            return Verdict(False, total, last_id or None, "rows after it were removed")
    return Verdict(True, total)
