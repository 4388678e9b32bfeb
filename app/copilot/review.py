"""What an admin reads: approvals and audit rows of their tenant, filtered and paged by keyset,
and the dashboard's figures. Read-only."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.extensions import db
from app.models import ROW_ID_MAX, Approval, AuditEvent, User, utcnow
from app.status import Status

PAGE = 50
OLDER_THAN_MAX_MINUTES = 100 * 366 * 24 * 60  # "older than a century" is the largest filter that means anything
CURSOR_MAX = 253_402_300_799 * 1_000_000  # 9999-12-31T23:59:59Z, in microseconds: datetime's last second


@dataclass
class Filters:
    status: str | None = Status.PENDING
    action: str | None = None
    person: str | None = None  # an email
    older_than_minutes: int | None = None


def filters_from(args: Mapping[str, str]) -> Filters:
    """The approvals filters of a query string (the console's and the API's): pending by default."""
    return Filters(
        status=args.get("status", Status.PENDING) or None,
        action=args.get("action") or None,
        person=args.get("person") or None,
        older_than_minutes=whole_number(args.get("older_than"), OLDER_THAN_MAX_MINUTES),
    )


def audit_filters_from(args: Mapping[str, str]) -> dict[str, str | None]:
    """The audit log's filters of a query string."""
    return {k: args.get(k) or None for k in AUDIT_FILTERS}


@dataclass
class Page:
    rows: list[Any]
    next_cursor: str | None


def _cursor(created_at: datetime, ident: Any) -> str:
    """A URL-safe keyset cursor: microseconds since the epoch, and the id."""
    return f"{int(created_at.timestamp() * 1_000_000)}_{ident}"


def whole_number(text: str | None, maximum: int) -> int | None:
    """A count or id typed into a URL: ASCII digits only, capped at `maximum`; None for anything else
    (`"¹".isdigit()` is true, and a huge number overflows dates and the database's INTEGER)."""
    if not text or not (text.isascii() and text.isdigit()):
        return None
    return min(int(text), maximum)


def _parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    stamp, _, ident = (cursor or "").partition("_")
    micros = whole_number(stamp, CURSOR_MAX)
    if micros is None or not ident:
        return None
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC), ident


def approvals(tenant_id: int, filters: Filters, cursor: str | None = None, limit: int = PAGE) -> Page:
    """Newest first, keyset-paged on (created_at, id), inside one tenant."""
    query = sa.select(Approval).where(Approval.tenant_id == tenant_id)
    if filters.status:
        query = query.where(Approval.status == filters.status)
    if filters.action:
        query = query.where(Approval.action == filters.action)
    if filters.person:
        query = query.join(User, User.id == Approval.user_id).where(User.email == filters.person.lower())
    if filters.older_than_minutes:
        query = query.where(Approval.created_at <= utcnow() - timedelta(minutes=filters.older_than_minutes))
    after = _parse_cursor(cursor)
    if after:
        stamp, ident = after
        query = query.where(sa.or_(Approval.created_at < stamp, sa.and_(Approval.created_at == stamp, Approval.id < ident)))
    rows = list(db.session.scalars(query.order_by(Approval.created_at.desc(), Approval.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, _cursor(rows[-1].created_at, rows[-1].id) if more else None)


AUDIT_FILTERS = ("event", "outcome", "person", "approval_id")


def audit_rows(tenant_id: int, filters: Mapping[str, str | None], cursor: str | None = None, limit: int = PAGE) -> Page:
    """The tenant's audit rows, newest first, keyset-paged on seq. Filters: AUDIT_FILTERS."""
    event, outcome, person, approval_id = (filters.get(k) for k in AUDIT_FILTERS)
    query = sa.select(AuditEvent).where(AuditEvent.chain == tenant_id)
    if event:
        query = query.where(AuditEvent.event == event)
    if outcome:
        query = query.where(AuditEvent.outcome == outcome)
    if approval_id:
        query = query.where(AuditEvent.approval_id == approval_id)
    if person:
        query = query.join(User, User.id == AuditEvent.user_id).where(User.email == person.lower())
    before = whole_number(cursor, ROW_ID_MAX)
    if before is not None:
        query = query.where(AuditEvent.seq < before)
    rows = list(db.session.scalars(query.order_by(AuditEvent.seq.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, str(rows[-1].seq) if more else None)


@dataclass
class Dashboard:
    pending: int  # cards waiting for a decision: their person's, or a countersignature
    countersigning: int  # of those, the ones waiting for a countersignature
    decided_today: dict[str, int]
    median_seconds_to_decision: float | None
    days: list[date]
    per_day: dict[date, dict[str, int]]


def people(tenant_id: int) -> dict[int, str]:
    """Emails of the tenant's people, by id."""
    return {u.id: u.email for u in db.session.scalars(sa.select(User).where(User.tenant_id == tenant_id))}


def dashboard(tenant_id: int, days: int = 30, sample: int = 1000) -> Dashboard:
    """Pending now (a card waiting for its countersignature too), decided today by outcome,
    median time to decision (over the last `sample` decisions), and decisions per UTC day by
    outcome; counted in SQL on the tenant's indexes."""
    now = utcnow()
    start = (now - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    # Waiting for its person or for a second signature: both are pending decisions, counted apart
    # (the console says how many wait for a countersignature: its table's `pending` lists the others).
    waiting: dict[str, int] = {
        status: n
        for status, n in db.session.execute(
            sa.select(Approval.status, sa.func.count())
            .where(Approval.tenant_id == tenant_id, Approval.status.in_((Status.PENDING, Status.COUNTERSIGNING)))
            .group_by(Approval.status)
        )
    }
    day = sa.func.date(Approval.decided_at)
    counted = db.session.execute(
        sa.select(day, Approval.status, sa.func.count())
        .where(Approval.tenant_id == tenant_id, Approval.decided_at >= start)
        .group_by(day, Approval.status)
    ).all()
    per_day: dict[date, dict[str, int]] = defaultdict(dict)
    for when, status, n in counted:
        key = when if isinstance(when, date) else date.fromisoformat(str(when))
        per_day[key][status] = n
    recent = db.session.execute(
        sa.select(Approval.created_at, Approval.decided_at)
        .where(Approval.tenant_id == tenant_id, Approval.decided_at >= start)
        .order_by(Approval.decided_at.desc())
        .limit(sample)
    ).all()
    waits = [(decided - created).total_seconds() for created, decided in recent if decided is not None]
    return Dashboard(
        pending=sum(waiting.values()),
        countersigning=waiting.get(Status.COUNTERSIGNING, 0),
        decided_today=dict(per_day.get(now.date(), {})),
        median_seconds_to_decision=statistics.median(waits) if waits else None,
        days=[(start + timedelta(days=i)).date() for i in range(days)],
        per_day=dict(per_day),
    )
