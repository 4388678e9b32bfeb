"""Token scopes, server-side browser sessions, the credential a card and a run came from

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 10:40:00

Existing tokens become scope 'agent' (the safe choice: they keep chatting and calling actions,
but no longer answer cards; make a `--scope client` token for an app that must). Browser cookies
signed before this revision have no session row, so everyone signs in once more.
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "user_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_user_sessions_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_sessions")),
    )
    with op.batch_alter_table("user_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_user_sessions_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scope", sa.String(length=10), server_default="agent", nullable=False))

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("via", sa.String(length=80), server_default="", nullable=False))
        batch_op.add_column(sa.Column("agent", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("toolsets", sa.String(length=500), nullable=True))

    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("requested_via", sa.String(length=80), server_default="", nullable=False))
        batch_op.add_column(sa.Column("requested_by_agent", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade():
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_column("requested_by_agent")
        batch_op.drop_column("requested_via")

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("toolsets")
        batch_op.drop_column("agent")
        batch_op.drop_column("via")

    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("scope")

    with op.batch_alter_table("user_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_sessions_user_id"))

    op.drop_table("user_sessions")
