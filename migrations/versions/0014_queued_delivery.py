"""Queued delivery: `queued` joins the vocabulary (handle() handed its work to a queue; the card
moves on to done or failed when the delivery ends)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 19:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The statuses as of this revision (a migration does not import the app: the app moves on).
BEFORE = (
    "pending", "running", "done", "declined", "cancelled", "changed", "refused", "expired",
    "revoked", "failed", "interrupted", "superseded", "countersigning", "edited",
)  # fmt: skip
STATUSES = (*BEFORE, "queued")


def upgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint("ck_approvals_status", type_="check")
        batch_op.create_check_constraint("ck_approvals_status", sa.column("status").in_(STATUSES))


def downgrade():
    # Before this revision a card whose handle() queued its work was `done` (what it said then).
    op.execute(sa.text("UPDATE approvals SET status = 'done' WHERE status = 'queued'"))
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint("ck_approvals_status", type_="check")
        batch_op.create_check_constraint("ck_approvals_status", sa.column("status").in_(BEFORE))
