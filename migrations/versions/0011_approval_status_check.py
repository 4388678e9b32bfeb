"""Approval statuses are one vocabulary (app/status.py), held by a CHECK; a submitted form's field
names are kept as data (`filled`), not parsed back out of the model's sentence

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 17:00:00

Forms submitted before this revision keep their names only in `result` ("The person filled in:
a, b. …"): they are copied into `filled` here, once.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# The statuses as of this revision (a migration does not import the app: the app moves on).
STATUSES = (
    "pending", "running", "done", "declined", "cancelled", "changed",
    "refused", "expired", "revoked", "failed", "interrupted", "superseded",
)  # fmt: skip
PREFIX = "The person filled in: "


def upgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("filled", sa.JSON(), nullable=True))
        batch_op.create_check_constraint("ck_approvals_status", sa.column("status").in_(STATUSES))
    approvals = sa.table("approvals", sa.column("id"), sa.column("result"), sa.column("filled", sa.JSON()))
    conn = op.get_bind()
    forms = conn.execute(
        sa.text("SELECT id, result FROM approvals WHERE type = 'form' AND status IN ('done', 'failed', 'refused')")
    ).all()
    for ident, result in forms:
        if result and result.startswith(PREFIX):
            names = result[len(PREFIX) :].split(".")[0]
            filled = [] if names == "nothing" else [n.strip() for n in names.split(",") if n.strip()]
            conn.execute(approvals.update().where(approvals.c.id == ident).values(filled=filled))


def downgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint("ck_approvals_status", type_="check")
        batch_op.drop_column("filled")
