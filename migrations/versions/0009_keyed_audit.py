"""The audit chain keyed with AUDIT_KEY

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 10:40:00

Each row's hash becomes an HMAC with AUDIT_KEY (read from the app's config: the migration runs
inside the app context), the head gets a MAC, and audit_marks holds how far the admin page has
verified. Existing rows are re-keyed once, per chain, in order, while their old unkeyed links
hold: from the first row whose old link is already broken, rows are left as they were, so
`audit verify` still names that row after the upgrade (re-keying never launders an edit).
Verify before upgrading.
"""

import hashlib
import hmac
import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op
from flask import current_app

# revision identifiers, used by Alembic.
revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

COLUMNS = "id, chain, seq, prev_hash, hash, tenant_id, user_id, approval_id, event, outcome, detail, channel, created_at"


def upgrade():
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_id", sa.String(length=16), nullable=False, server_default=""))
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_id", sa.String(length=16), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("mac", sa.String(length=64), nullable=False, server_default=""))
    op.create_table(
        "audit_marks",
        sa.Column("chain", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("swept", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("mac", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("chain", name=op.f("pk_audit_marks")),
    )
    _rekey(current_app.config["AUDIT_KEY"].encode())


def downgrade():
    _unkey()
    op.drop_table("audit_marks")
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.drop_column("mac")
        batch_op.drop_column("key_id")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_column("key_id")


# The link rules before and after this revision, copied from app/copilot/audit.py so that this
# migration stays fixed when that module changes.


def _created(value):
    if not isinstance(value, datetime):
        value = datetime.fromisoformat(str(value))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def _content(row):
    return {
        "chain": row["chain"],
        "seq": row["seq"],
        "tenant_id": row["tenant_id"],
        "user_id": row["user_id"],
        "approval_id": row["approval_id"],
        "event": row["event"],
        "outcome": row["outcome"],
        "detail": row["detail"],
        "channel": row["channel"],
        "created_at": _created(row["created_at"]),
    }


def _old_link(prev, row):
    canonical = json.dumps(_content(row), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256((prev + canonical).encode()).hexdigest()


def _mac(key, kind, *parts):
    message = json.dumps([kind, *parts], separators=(",", ":"))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def _key_id(key):
    return hmac.new(key, b"countersign audit key id", hashlib.sha256).hexdigest()[:12]


def _new_link(key, kid, prev, row):
    canonical = json.dumps({**_content(row), "key_id": kid}, sort_keys=True, separators=(",", ":"))
    return _mac(key, "row", prev, canonical)


def _rows(bind, batch=5000):
    """Every audit row in (chain, seq) order, read in keyset batches."""
    chain, seq = -1, 0
    while True:
        rows = (
            bind.execute(
                sa.text(
                    f"SELECT {COLUMNS} FROM audit_events WHERE chain > :c OR (chain = :c AND seq > :s) "
                    "ORDER BY chain, seq LIMIT :n"
                ),
                {"c": chain, "s": seq, "n": batch},
            )
            .mappings()
            .all()
        )
        if not rows:
            return
        yield from rows
        chain, seq = rows[-1]["chain"], rows[-1]["seq"]


def _rekey(key):
    """Re-link each chain with the key while its old links hold; then MAC every head."""
    bind, kid = op.get_bind(), _key_id(key)
    state, updates = {}, []  # chain -> (expected seq, old prev, new prev, still sound)
    last = {}  # chain -> (old hash, new hash) of its last re-keyed row, for the head
    for row in _rows(bind):
        seq, old_prev, new_prev, sound = state.get(row["chain"], (1, "", "", True))
        sound = sound and row["seq"] == seq and row["prev_hash"] == old_prev and _old_link(old_prev, row) == row["hash"]
        if sound:
            new_hash = _new_link(key, kid, new_prev, row)
            updates.append({"i": row["id"], "p": new_prev, "h": new_hash, "k": kid})
            last[row["chain"]] = (row["hash"], new_hash)
            new_prev = new_hash
        state[row["chain"]] = (row["seq"] + 1, row["hash"], new_prev, sound)
        if len(updates) >= 1000:
            _flush(bind, updates)
    _flush(bind, updates)
    for head in bind.execute(sa.text("SELECT chain, seq, hash FROM audit_heads")).mappings().all():
        old, new = last.get(head["chain"], ("", ""))
        digest = new if head["hash"] == old else head["hash"]  # any other head stays as wrong as it was
        bind.execute(
            sa.text("UPDATE audit_heads SET hash = :h, key_id = :k, mac = :m WHERE chain = :c"),
            {"h": digest, "k": kid, "m": _mac(key, "head", head["chain"], head["seq"], digest), "c": head["chain"]},
        )


def _flush(bind, updates):
    if updates:
        bind.execute(sa.text("UPDATE audit_events SET prev_hash = :p, hash = :h, key_id = :k WHERE id = :i"), updates)
        updates.clear()


def _unkey():
    """Back to the unkeyed chain of revision 0004: re-link every row in order, heads on the last rows."""
    bind, heads, updates = op.get_bind(), {}, []
    for row in _rows(bind):
        prev = heads.get(row["chain"], (0, ""))[1]
        digest = _old_link(prev, row)
        updates.append({"i": row["id"], "p": prev, "h": digest, "k": ""})
        heads[row["chain"]] = (row["seq"], digest)
        if len(updates) >= 1000:
            _flush(bind, updates)
    _flush(bind, updates)
    for chain, (seq, digest) in heads.items():
        bind.execute(sa.text("UPDATE audit_heads SET seq = :s, hash = :h WHERE chain = :c"), {"s": seq, "h": digest, "c": chain})
