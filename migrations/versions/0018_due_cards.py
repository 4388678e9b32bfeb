"""The cards past their time (every conversation's page, the API's lists and the cron sweep look for
them) and the claims that died are found by an index of the approvals by status and expiry, not by
reading every card ever kept: with 200,000 cards, a conversation's look 26.7 → 0.12 ms on SQLite,
49.7 → 0.34 ms on PostgreSQL (a parallel scan of the table, at every page load)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 23:10:00
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_status_expires", ["status", "expires_at"], unique=False)


def downgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index("ix_approvals_status_expires")
