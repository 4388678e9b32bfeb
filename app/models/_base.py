"""What every table shares: the model base, UTC timestamps, unguessable ids."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from app.extensions import Base, db

if TYPE_CHECKING:
    Model = Base  # what db.Model is, in a form type checkers follow
else:
    Model = db.Model


ROW_ID_MAX = 2**31 - 1  # the largest INTEGER primary key (and sequence number) the tables hold


def utcnow() -> datetime:
    """Now, in UTC, timezone-aware (what every timestamp column holds)."""
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator):
    """A DateTime that always comes back timezone-aware in UTC (SQLite drops tzinfo)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


def new_id() -> str:
    """An unguessable id; an approval's id doubles as its idempotency key."""
    return secrets.token_hex(16)
