"""The second signature: a decline's words for the model, edits, what changed, countersignatures;
two statuses join the vocabulary (`countersigning`, `edited`)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# The statuses as of this revision (a migration does not import the app: the app moves on).
BEFORE = (
    "pending", "running", "done", "declined", "cancelled", "changed",
    "refused", "expired", "revoked", "failed", "interrupted", "superseded",
)  # fmt: skip
STATUSES = (*BEFORE, "countersigning", "edited")


def upgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("feedback", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("replaces", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("edited", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("changes", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("countersign", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("confirmed_by", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key("fk_approvals_confirmed_by_users", "users", ["confirmed_by"], ["id"])
        batch_op.drop_constraint("ck_approvals_status", type_="check")
        batch_op.create_check_constraint("ck_approvals_status", sa.column("status").in_(STATUSES))


def downgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint("ck_approvals_status", type_="check")
        batch_op.create_check_constraint("ck_approvals_status", sa.column("status").in_(BEFORE))
        batch_op.drop_constraint("fk_approvals_confirmed_by_users", type_="foreignkey")
        for column in ("confirmed_at", "confirmed_by", "countersign", "changes", "edited", "replaces", "feedback"):
            batch_op.drop_column(column)
