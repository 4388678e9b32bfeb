"""What a turn looks up by its conversation is found by an index: whether it has a chat thread to
post to (at every turn's end: 8.7 → 0.004 ms with 100,000 threads on SQLite) and the cards of calls
still open when the person writes again (29.3 → 0.009 ms with 200,000 cards)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 23:20:00
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("connector_threads", schema=None) as batch_op:
        batch_op.create_index("ix_connector_threads_conversation", ["conversation_id"], unique=False)
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_conversation_call", ["conversation_id", "tool_call_id"], unique=False)


def downgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index("ix_approvals_conversation_call")
    with op.batch_alter_table("connector_threads", schema=None) as batch_op:
        batch_op.drop_index("ix_connector_threads_conversation")
