"""The sweeps' look-ups (passes gone silent, runs left queued), which every worker makes every
TURN_HEARTBEAT, read the runs in one state by an index instead of scanning every run ever kept

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 20:30:00
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_status_updated", ["status", "updated_at"], unique=False)


def downgrade():
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_status_updated")
