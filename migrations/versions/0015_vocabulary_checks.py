"""One vocabulary in the database too: CHECK constraints hold `runs.status`, `messages.role` and
`approvals.type` to their words (app/status); a conversation made for a channel (an MCP client's
calls) is found by its `channel_key`, never by its title

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 22:00:00

Before this revision MCP found its conversation by the title "mcp client", so a person's own
conversation renamed so received MCP's calls. Existing rows get no key: the next MCP call starts a
fresh conversation (a title is the person's to change, so it cannot say which one was MCP's).
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# The words as of this revision (a migration does not import the app: the app moves on).
RUN_STATUSES = ("queued", "running", "paused", "done", "failed", "stopped", "interrupted", "external")
ROLES = ("user", "assistant", "notice", "error", "card")
TYPES = ("confirm", "form")


def upgrade():
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_check_constraint("ck_runs_status", sa.column("status").in_(RUN_STATUSES))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_check_constraint("ck_messages_role", sa.column("role").in_(ROLES))
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_check_constraint("ck_approvals_type", sa.column("type").in_(TYPES))
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("channel_key", sa.String(length=80), nullable=True))
        # One conversation per person and channel key (NULLs differ; deleting one clears its key).
        batch_op.create_unique_constraint("uq_conversations_user_channel_key", ["user_id", "channel_key"])


def downgrade():
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_constraint("uq_conversations_user_channel_key", type_="unique")
        batch_op.drop_column("channel_key")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint("ck_approvals_type", type_="check")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_constraint("ck_messages_role", type_="check")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint("ck_runs_status", type_="check")
