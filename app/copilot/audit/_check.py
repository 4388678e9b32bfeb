"""Checking the audit log: walk each tenant's chain link by link (whole, or since the last signed
mark), hold every approval to its first row, and compare with a checkpoint kept elsewhere."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.copilot.audit._chain import (
    APPROVAL_CREATED,
    HEAD_RECREATED,
    ROW,
    Keyring,
    Position,
    head_mac,
    insert,
    keyring,
    mac,
    parse_checkpoint,
    row_problem,
    signed_by,
)
from app.extensions import db
from app.models import Approval, AuditEvent, AuditHead, AuditMark, Tenant

SWEEP_ROWS = 2000  # older rows re-checked per incremental verify, in rounds over the whole chain
# The admin page holds to their rows the approvals made since its mark's row, and this long before it:
# an approval is stamped before its writer waits its turn at the head (and hosts' clocks differ).
EVIDENCE_SLACK = timedelta(hours=1)


@dataclass(frozen=True)
class Verdict:
    """What checking the chain found: how many rows held, and the first that did not and why."""

    ok: bool
    rows: int
    broken_id: int | None = None
    reason: str = ""
    recreated: int = 0  # heads rebuilt (HEAD_RECREATED rows): only a checkpoint rules out a cut end there

    def __str__(self) -> str:
        if not self.ok:
            where = f" at row {self.broken_id}" if self.broken_id is not None else ""
            return f"audit chain broken{where}: {self.reason}"
        note = (
            (
                f" (its head was rebuilt {self.recreated} time(s): see the {HEAD_RECREATED} rows, and verify "
                "--against a checkpoint to rule out rows cut from the end)"
            )
            if self.recreated
            else ""
        )
        return f"audit chain verifies: {self.rows} rows{note}"


@dataclass
class _Walk:
    """How far a walk along one chain has got: the last good row (seq, hash, id), rows read."""

    chain: int
    seq: int = 0
    hash: str = ""
    row_id: int | None = None
    rows: int = 0

    def broken(self, row_id: int | None, reason: str) -> Verdict:
        return Verdict(False, self.rows, row_id, reason)


def _walk(ring: Keyring, at: _Walk, until: int | None = None, batch: int = 5000) -> Verdict | None:
    """Check the rows after `at` in order (up to seq `until`), moving `at` along;
    the first row that fails makes the Verdict."""
    while until is None or at.seq < until:
        query = sa.select(*ROW).where(AuditEvent.chain == at.chain, AuditEvent.seq > at.seq)
        if until is not None:
            query = query.where(AuditEvent.seq <= until)
        rows = db.session.execute(query.order_by(AuditEvent.seq).limit(batch)).all()
        if not rows:
            return None
        for row in rows:
            at.rows += 1
            problem = row_problem(ring, row, at.seq + 1, at.hash)
            if problem:
                return at.broken(row.id, problem)
            at.seq, at.hash, at.row_id = row.seq, row.hash, row.id
    return None


def _check_head(ring: Keyring, at: _Walk) -> Verdict | None:
    """The head must be signed and sit exactly on the walk's last row. Rows committed while
    walking move the head on: walk them too, and look again."""
    while True:
        got = db.session.execute(
            sa.select(AuditHead.seq, AuditHead.hash, AuditHead.key_id, AuditHead.mac).where(AuditHead.chain == at.chain)
        ).first()
        if got is None:
            return at.broken(at.row_id, f"the head row of chain {at.chain} is missing") if at.seq else None
        head = Position(at.chain, got.seq, got.hash)
        if not signed_by(ring, got.key_id, got.mac, head_mac, head):
            return at.broken(at.row_id, "the head's MAC does not verify (the head was moved or forged)")
        if head.seq < at.seq:
            return at.broken(at.row_id, f"the head names row {head.seq}, behind the chain's last row (rewound)")
        if head.seq == at.seq:
            return (
                None
                if hmac.compare_digest(head.hash, at.hash)
                else at.broken(at.row_id, "the head does not match the chain's last row")
            )
        before = at.seq
        bad = _walk(ring, at, until=head.seq)
        if bad or at.seq == before:
            return bad or at.broken(at.row_id, f"rows after row {at.seq} were removed (the head names row {head.seq})")


def _chains() -> list[int]:
    """Every chain with a row, a head or a mark: a chain deleted whole still has its mark."""
    events = db.session.scalars(sa.select(AuditEvent.chain).distinct())
    return sorted({*events, *db.session.scalars(sa.select(AuditHead.chain)), *db.session.scalars(sa.select(AuditMark.chain))})


def verify(chain: int | None = None, batch: int = 5000) -> Verdict:
    """Walk the chain(s) in full and name the first row, or the head, that does not hold; then
    hold each chain to its signed mark, which the admin page leaves as a checkpoint of its own, and
    to the approvals in the database (each has its row); rows no walk reaches are named too."""
    ring = keyring()
    total = 0
    stray = _stray_row(chain)
    if stray:
        return stray
    for key in [chain] if chain is not None else _chains():
        at = _Walk(key)
        mark = _signed_mark(ring, key)
        bad = _walk(ring, at, batch=batch) or _check_head(ring, at) or (mark and _still_holds(at, mark))
        total += at.rows
        if bad:
            return replace(bad, rows=total)
    unrecorded = _unrecorded_approvals(chain)
    if unrecorded:
        return replace(unrecorded, rows=total)
    recreated = sa.select(sa.func.count()).select_from(AuditEvent).where(AuditEvent.event == HEAD_RECREATED)
    if chain is not None:
        recreated = recreated.where(AuditEvent.chain == chain)
    return Verdict(True, total, recreated=db.session.scalar(recreated) or 0)


def _stray_row(chain: int | None) -> Verdict | None:
    """A row no walk reaches, which only someone writing the database can have put there: one
    before a chain's first row (seq < 1), or in a chain that is neither 0 (no tenant) nor a tenant's."""
    outside = sa.or_(AuditEvent.seq < 1, sa.and_(AuditEvent.chain != 0, AuditEvent.chain.not_in(sa.select(Tenant.id))))
    if chain is not None:  # one tenant's chain (the admin page): an index range, not a scan of the chain
        outside = sa.and_(AuditEvent.chain == chain, AuditEvent.seq < 1)
    query = sa.select(AuditEvent.id, AuditEvent.chain, AuditEvent.seq).where(outside)
    row = db.session.execute(query.order_by(AuditEvent.id).limit(1)).first()
    if row is None:
        return None
    if row.seq < 1:
        return Verdict(
            False, 0, row.id, f"it claims sequence {row.seq} in chain {row.chain}, but chains start at row 1: it was made up"
        )
    return Verdict(False, 0, row.id, f"it is in chain {row.chain}, which is neither 0 nor a tenant's: it was made up")


def _unrecorded_approvals(chain: int | None, since: datetime | None = None) -> Verdict | None:
    """Each approval is written with its APPROVAL_CREATED row in its tenant's chain, in one
    transaction: an approval without one means rows were removed, down to a whole chain deleted
    (and perhaps begun again). Only approvals made at or after `since`, if given."""
    recorded = sa.exists().where(
        AuditEvent.approval_id == Approval.id, AuditEvent.chain == Approval.tenant_id, AuditEvent.event == APPROVAL_CREATED
    )
    query = (
        sa.select(Approval.tenant_id, sa.func.count(), sa.func.min(Approval.id))
        .where(~recorded)
        .group_by(Approval.tenant_id)
        .order_by(Approval.tenant_id)
        .limit(1)
    )
    if chain is not None:
        query = query.where(Approval.tenant_id == chain)
    if since is not None:
        query = query.where(Approval.created_at >= since)
    found = db.session.execute(query).first()
    if found is None:
        return None
    tenant, missing, first = found
    if db.session.scalar(sa.select(AuditEvent.id).where(AuditEvent.chain == tenant).limit(1)) is None:
        return Verdict(False, 0, None, f"the chain of tenant {tenant} is missing: {missing} approval(s) have no audit rows")
    return Verdict(
        False,
        0,
        None,
        f"{missing} approval(s) of tenant {tenant} have no {APPROVAL_CREATED} row in "
        f"its chain (the first: {first}): its rows were removed, or the chain deleted and begun again",
    )


def verify_since_mark(chain: int) -> Verdict:
    """What the admin page shows, without walking the whole chain on every view: from the last
    verified point (a keyed mark), check its row, the rows since and the head, plus the next
    SWEEP_ROWS older rows in a round that covers the whole chain over successive views. Anything
    wrong, the mark included, falls back to a full walk, which names the first broken row.
    The tenant's approvals since the mark (all of them after a full walk) must have their rows.
    Commits the new mark (call it with nothing else pending)."""
    ring = keyring()
    mark = _signed_mark(ring, chain)
    at = _resume(ring, mark) if mark else None
    swept: int | None = None
    since = _evidence_since(chain, mark.seq) if at is not None and mark is not None else None
    if at is not None and mark is not None and not (_walk(ring, at) or _check_head(ring, at)):
        swept = _sweep(ring, chain, mark.swept, mark.seq)
    if at is None or swept is None:
        at, since = _Walk(chain), None
        bad = _walk(ring, at) or _check_head(ring, at) or (mark and _still_holds(at, mark))
        if bad:
            return bad
        swept = 0
    bad = _stray_row(chain) or _unrecorded_approvals(chain, since)
    if bad:
        return bad
    _save_mark(ring, at, swept)
    return Verdict(True, at.seq)


def _evidence_since(chain: int, seq: int) -> datetime | None:
    """From when approvals must be held to their rows: the mark's row, less EVIDENCE_SLACK (None: all)."""
    when = db.session.scalar(sa.select(AuditEvent.created_at).where(AuditEvent.chain == chain, AuditEvent.seq == seq))
    return when - EVIDENCE_SLACK if when is not None else None


def _mark_mac(key: bytes, chain: int, seq: int, hash_: str, swept: int) -> str:
    return mac(key, "mark", chain, seq, hash_, swept)


def _signed_mark(ring: Keyring, chain: int) -> Any:
    """The chain's mark if one of our keys signed it (else None: a mark is only a cache)."""
    mark = db.session.execute(sa.select(AuditMark.__table__).where(AuditMark.chain == chain)).first()
    if mark is None or not signed_by(ring, mark.key_id, mark.mac, _mark_mac, chain, mark.seq, mark.hash, mark.swept):
        return None
    return mark


def _resume(ring: Keyring, mark: Any) -> _Walk | None:
    """Where the mark says verification stopped, if its row still reads the same."""
    if mark.seq == 0:
        return _Walk(mark.chain)
    row = db.session.execute(sa.select(*ROW).where(AuditEvent.chain == mark.chain, AuditEvent.seq == mark.seq)).first()
    if row is None or row.hash != mark.hash or row_problem(ring, row, mark.seq, row.prev_hash):
        return None
    return _Walk(mark.chain, row.seq, row.hash, row.id)


def _still_holds(at: _Walk, mark: Any) -> Verdict | None:
    """A sound chain that no longer reaches, or no longer holds, the row it was once verified up
    to was cut back or rewritten (with its head moved to match)."""
    if at.seq < mark.seq:
        return at.broken(
            at.row_id,
            f"chain {at.chain} ends at row {at.seq}, but it was verified up to row {mark.seq} before: rows were cut from its end",
        )
    row = db.session.execute(
        sa.select(AuditEvent.id, AuditEvent.hash).where(AuditEvent.chain == mark.chain, AuditEvent.seq == mark.seq)
    ).first()
    if mark.seq and (row is None or not hmac.compare_digest(row.hash, mark.hash)):
        return at.broken(
            row.id if row else None, f"row {mark.seq} differs from when it was verified: the chain was rewritten since"
        )
    return None


def _sweep(ring: Keyring, chain: int, start: int, end: int) -> int | None:
    """Re-check rows start+1 … start+SWEEP_ROWS (not past `end`); where the next round starts, or None if one fails."""
    stop = min(start + SWEEP_ROWS, end)
    if start >= stop:
        return 0
    prev = (
        ""
        if start == 0
        else db.session.scalar(sa.select(AuditEvent.hash).where(AuditEvent.chain == chain, AuditEvent.seq == start))
    )
    if prev is None:
        return None
    at = _Walk(chain, start, prev)
    if _walk(ring, at, until=stop) or at.seq != stop:
        return None
    return 0 if stop >= end else stop


def _save_mark(ring: Keyring, at: _Walk, swept: int) -> None:
    values: dict[str, Any] = {
        "chain": at.chain,
        "seq": at.seq,
        "hash": at.hash,
        "swept": swept,
        "key_id": ring.current,
        "mac": _mark_mac(ring.keys[ring.current], at.chain, at.seq, at.hash, swept),
    }
    statement = insert(AuditMark).values(**values)
    db.session.execute(
        statement.on_conflict_do_update(
            index_elements=[AuditMark.chain], set_={k: statement.excluded[k] for k in values if k != "chain"}
        )
    )
    db.session.commit()


def verify_against(line: str) -> Verdict:
    """Does every chain still hold the row a checkpoint names, with that hash? A chain cut back
    (even with its head moved consistently) or rewritten since the checkpoint fails here."""
    try:
        entries = parse_checkpoint(line)
    except ValueError as error:
        return Verdict(False, 0, None, f"not a checkpoint `audit checkpoint` printed ({error})")
    keys = keyring().keys.values()
    for at, signature in entries:
        if not any(hmac.compare_digest(head_mac(key, at), signature) for key in keys):
            return Verdict(
                False,
                0,
                None,
                f"the checkpoint's entry for chain {at.chain} does not verify "
                "with any configured key (mistyped, forged, or its key was dropped)",
            )
        row = db.session.execute(
            sa.select(AuditEvent.id, AuditEvent.hash).where(AuditEvent.chain == at.chain, AuditEvent.seq == at.seq)
        ).first()
        if at.seq and row is None:
            return Verdict(
                False,
                0,
                None,
                f"chain {at.chain} no longer has row {at.seq}, which the checkpoint names: rows were cut from it since",
            )
        if row is not None and not hmac.compare_digest(row.hash, at.hash):
            return Verdict(
                False, 0, row.id, f"row {at.seq} of chain {at.chain} differs from the checkpoint: the chain was rewritten since"
            )
    return Verdict(True, len(entries))
