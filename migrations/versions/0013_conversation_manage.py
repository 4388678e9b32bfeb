"""Conversations people manage: `deleted_at` (a deleted conversation is kept, hidden, because its
approvals and the audit log still name it), and an index for the person's own list

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_conversations_user_deleted", ["user_id", "deleted_at"], unique=False)


def downgrade():
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_index("ix_conversations_user_deleted")
        batch_op.drop_column("deleted_at")
