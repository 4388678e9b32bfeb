"""Turns run as jobs: what a run's next pass reads, its order in the conversation, its channel,
and which pass each message came from

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 13:30:00

A run is queued (its pass waits for a worker), running, paused on cards, or ended (done, failed,
stopped, interrupted). `next` says what its next pass feeds the model: the person's message
(`prompt`), the answers to its cards (`results`), or the history it had reached (`continue`,
after a pass that ran tools and then failed or stopped). Runs that were `running` when this
revision is applied were cut short by the upgrade: they become `interrupted`.
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("channel", sa.String(length=40), server_default="", nullable=False))
        batch_op.add_column(sa.Column("message_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("next", sa.String(length=10), server_default="prompt", nullable=False))
        batch_op.add_column(sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_runs_conversation_status", ["conversation_id", "status"], unique=False)

    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("step", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_messages_run_id"), ["run_id"], unique=False)

    op.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")


def downgrade():
    op.execute("UPDATE runs SET status = 'failed' WHERE status IN ('queued', 'stopped', 'interrupted')")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_run_id"))
        batch_op.drop_column("step")
        batch_op.drop_column("run_id")

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_conversation_status")
        batch_op.drop_column("queued_at")
        batch_op.drop_column("next")
        batch_op.drop_column("message_id")
        batch_op.drop_column("channel")
