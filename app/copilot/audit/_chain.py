"""The audit log: one row per decision and per refused attempt, never a value. Rows form a chain
per tenant, each link an HMAC with AUDIT_KEY (a setting, never in the database), so someone who can
write the database still cannot edit, remove, reorder or re-link rows, or move the head, unseen."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask import current_app

from app.extensions import db
from app.models import Approval, AuditEvent, AuditHead, utcnow

HEAD_RECREATED = "audit.head_recreated"
APPROVAL_CREATED = "approval.created"  # every approval's first row, written in the approval's own transaction
CHECKPOINT_PREFIX = "countersign-audit-checkpoint/1"
ROW = tuple(AuditEvent.__table__.c)  # rows are read as plain tuples: a long walk fills no identity map


@dataclass(frozen=True)
class Keyring:
    """The key new links are made with (by id) and every key an old link may have been made with."""

    current: str
    keys: Mapping[str, bytes]


def key_id(key: bytes) -> str:
    """A short public name for a key (an HMAC of a label: it tells nothing of the key)."""
    return hmac.new(key, b"countersign audit key id", hashlib.sha256).hexdigest()[:12]


@functools.lru_cache(maxsize=8)
def _keyring(current: str, fallbacks: tuple[str, ...]) -> Keyring:
    keys = {key_id(k.encode()): k.encode() for k in (*fallbacks, current)}
    return Keyring(key_id(current.encode()), keys)


def keyring() -> Keyring:
    """AUDIT_KEY makes new links; AUDIT_KEY_FALLBACKS still verify the rows made before a rotation."""
    config = current_app.config
    return _keyring(config["AUDIT_KEY"], tuple(config.get("AUDIT_KEY_FALLBACKS") or ()))


def mac(key: bytes, kind: str, *parts: object) -> str:
    """HMAC-SHA256 over a label (row, head, mark) and the parts, JSON-encoded so no two inputs read alike."""
    message = json.dumps([kind, *parts], separators=(",", ":"))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def canonical(row: Any) -> str:
    """The row's content as MACed: every field but id and the hashes, in a fixed form."""
    created: datetime = row.created_at
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    content = {
        "chain": row.chain,
        "seq": row.seq,
        "tenant_id": row.tenant_id,
        "user_id": row.user_id,
        "approval_id": row.approval_id,
        "event": row.event,
        "outcome": row.outcome,
        "detail": row.detail,
        "channel": row.channel,
        "created_at": created.astimezone(UTC).isoformat(),
        "key_id": row.key_id,
    }
    return json.dumps(content, sort_keys=True, separators=(",", ":"))


def link(key: bytes, prev_hash: str, row: Any) -> str:
    return mac(key, "row", prev_hash, canonical(row))


@dataclass(frozen=True)
class Position:
    """A point in a chain: its row `seq` (0 before the first) and that row's hash."""

    chain: int
    seq: int
    hash: str


def head_mac(key: bytes, at: Position) -> str:
    return mac(key, "head", at.chain, at.seq, at.hash)


def signed_by(ring: Keyring, key_id_: str, expected: str, make: Any, *parts: Any) -> bool:
    """Did the key named `key_id_` (one of ours) make `expected` = make(key, *parts)?"""
    key = ring.keys.get(key_id_)
    return key is not None and hmac.compare_digest(make(key, *parts), expected)


# --- writing -------------------------------------------------------------------------------------


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
    Taking the chain's head row first makes concurrent writers of one tenant wait their turn; a
    missing, rewound or forged head is rebuilt from the chain's last row, in a row of its own."""
    ring = keyring()
    head, repaired = _take_head(tenant_id or 0, ring, approval_id if event == APPROVAL_CREATED else None)
    if repaired:
        said = _append(
            ring,
            head,
            event=HEAD_RECREATED,
            outcome="recreated",
            tenant_id=tenant_id,
            user_id=None,
            approval_id=None,
            detail=repaired,
            channel="audit",
        )
        head = Position(said.chain, said.seq, said.hash)
    return _append(
        ring,
        head,
        event=event,
        outcome=outcome,
        tenant_id=tenant_id,
        user_id=user_id,
        approval_id=approval_id,
        detail=detail[:500],
        channel=channel,
    )


def _append(ring: Keyring, head: Position, **fields: Any) -> AuditEvent:
    """Add the row after `head`, linked with the current key, and move the head (with its MAC) to it."""
    row = AuditEvent(chain=head.chain, seq=head.seq + 1, prev_hash=head.hash, key_id=ring.current, created_at=utcnow(), **fields)
    row.hash = link(ring.keys[ring.current], head.hash, row)
    db.session.add(row)
    _set_head(ring, Position(head.chain, row.seq, row.hash))
    return row


# The head's two statements, built once (every audited decision runs both; SQLAlchemy builds and
# keys a statement made per call afresh). A bound parameter may not take a column's name here.
_chain: sa.BindParameter[int] = sa.bindparam("its_chain")
_SET_HEAD = (
    sa.update(AuditHead)
    .where(AuditHead.chain == _chain)
    .values(seq=sa.bindparam("at_seq"), hash=sa.bindparam("at_hash"), key_id=sa.bindparam("by_key"), mac=sa.bindparam("its_mac"))
)
_TAKE_HEAD = (
    sa.update(AuditHead)
    .where(AuditHead.chain == _chain)
    .values(seq=AuditHead.seq)
    .returning(
        AuditHead.seq,
        AuditHead.hash,
        AuditHead.key_id,
        AuditHead.mac,
        sa.select(sa.func.max(AuditEvent.seq)).where(AuditEvent.chain == _chain).scalar_subquery(),
    )
)


def _set_head(ring: Keyring, at: Position) -> None:
    mac = head_mac(ring.keys[ring.current], at)
    db.session.execute(
        _SET_HEAD, {"its_chain": at.chain, "at_seq": at.seq, "at_hash": at.hash, "by_key": ring.current, "its_mac": mac}
    )


def _take_head(chain: int, ring: Keyring, creating: str | None = None) -> tuple[Position, str]:
    """Lock and read the chain's head; with it, why it had to be rebuilt ("" when it did not).
    The chain's last seq comes back in the same statement: a head behind it would make every
    later insert collide. `creating`: the approval this write is the first row of (not evidence)."""
    got = db.session.execute(_TAKE_HEAD, {"its_chain": chain}).first()
    if got is None:
        return _recreate_head(chain, ring, creating)
    head = Position(chain, got[0], got[1])
    if (got[4] or 0) > head.seq:
        return _rebuild_head(chain, ring, f"the head named row {head.seq} but the chain went on to row {got[4]}")
    if not signed_by(ring, got[2], got[3], head_mac, head):
        return _rebuild_head(chain, ring, "the head's MAC did not verify")
    return head, ""


def _recreate_head(chain: int, ring: Keyring, creating: str | None) -> tuple[Position, str]:
    """No head row: a new chain, or a deleted head, which is rebuilt from the chain's last row.
    An empty chain whose tenant already has approvals was deleted whole: the new one says so."""
    start, note = _last_row(chain, ring)
    created = db.session.execute(
        insert(AuditHead)
        .values(  # None: another writer recreated it just now
            chain=chain, seq=start.seq, hash=start.hash, key_id=ring.current, mac=head_mac(ring.keys[ring.current], start)
        )
        .on_conflict_do_nothing()
        .returning(AuditHead.chain)
    ).first()
    head, repaired = _take_head(chain, ring)
    if created is not None and not repaired:
        repaired = f"the head row was missing; {note}" if start.seq else _chain_was_missing(chain, creating)
    return head, repaired


def _chain_was_missing(chain: int, creating: str | None) -> str:
    """Why a new chain is not a first one ("" when it is): its tenant already has approvals, each of
    which had its row in the chain."""
    earlier = db.session.scalar(
        sa.select(sa.func.count()).select_from(Approval).where(Approval.tenant_id == chain, Approval.id != (creating or ""))
    )
    if not earlier:
        return ""
    return f"the chain was missing: {earlier} approval(s) of tenant {chain} have no audit rows; a new chain starts here"


def insert(model: Any) -> Any:
    """An INSERT that can say ON CONFLICT, in the database's own dialect (imported here: start-up
    need not load PostgreSQL's dialect for a SQLite app)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return (postgresql if db.session.get_bind().dialect.name == "postgresql" else sqlite).insert(model)


def _rebuild_head(chain: int, ring: Keyring, why: str) -> tuple[Position, str]:
    start, note = _last_row(chain, ring)
    _set_head(ring, start)
    return start, f"{why}; {note}"


def _last_row(chain: int, ring: Keyring) -> tuple[Position, str]:
    """The chain's last row as a head, and a note saying whether that row itself verifies."""
    row = db.session.execute(sa.select(*ROW).where(AuditEvent.chain == chain).order_by(AuditEvent.seq.desc()).limit(1)).first()
    if row is None:
        return Position(chain, 0, ""), "the chain is empty"
    sound = not row_problem(ring, row, row.seq, row.prev_hash)
    return Position(chain, row.seq, row.hash), f"rebuilt from row {row.seq}" + ("" if sound else ", which does not verify")


def record_now(event: str, outcome: str, **fields: Any) -> None:
    """Record and commit at once, in a transaction of its own; for refused attempts,
    which must be kept even when the request that made them fails."""
    db.session.rollback()
    record(event, outcome, **fields)
    db.session.commit()


def row_problem(ring: Keyring, row: Any, seq: int, prev: str) -> str:
    """Why `row` is not the sound row `seq` after a row hashed `prev` ("" when it is)."""
    if row.seq != seq:
        return f"sequence {row.seq}, expected {seq} (a row was removed or inserted)"
    if row.prev_hash != prev:
        return "does not link to the row before it"
    if row.key_id not in ring.keys:
        return f"made with key {row.key_id or '(none)'}, which is neither AUDIT_KEY nor in AUDIT_KEY_FALLBACKS"
    if not hmac.compare_digest(link(ring.keys[row.key_id], prev, row), row.hash):
        return "its content was changed (or it was linked with another key)"
    return ""


# --- checkpoints ---------------------------------------------------------------------------------


def checkpoint() -> str:
    """Every chain's head (chain:seq:hash:mac) on one line, to keep where the database's writers
    cannot reach; `verify_against()` later proves the chains still hold those rows."""
    heads = db.session.execute(
        sa.select(AuditHead.chain, AuditHead.seq, AuditHead.hash, AuditHead.mac).order_by(AuditHead.chain)
    ).all()
    return " ".join([CHECKPOINT_PREFIX, *(f"{h.chain}:{h.seq}:{h.hash}:{h.mac}" for h in heads)])


def parse_checkpoint(line: str) -> list[tuple[Position, str]]:
    """The heads a checkpoint line names, with their MACs; ValueError if it is not one."""
    prefix, *entries = line.split()
    if prefix != CHECKPOINT_PREFIX:
        raise ValueError(f"it does not start with {CHECKPOINT_PREFIX}")
    parsed = []
    for entry in entries:
        chain, seq, digest, signature = entry.split(":")
        parsed.append((Position(int(chain), int(seq), digest), signature))
    return parsed
