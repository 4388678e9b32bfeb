"""People link their own chat accounts: one-time codes, kept hashed, single-use, short-lived; and
which cards reach each linked account outside a thread (`connector_identities.cards`)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 01:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

CARDS = ("agents", "all", "off")  # the words as of this revision (app.status.CardsTo)


def upgrade():
    op.create_table(
        "link_codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("connector", sa.String(length=20), nullable=False),
        sa.Column("address", sa.String(length=320), nullable=False),
        sa.Column("claimed_by", sa.String(length=320), nullable=False),
        sa.Column("claimed_name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_link_codes_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_link_codes")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_link_codes_code_hash")),
    )
    with op.batch_alter_table("link_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_link_codes_user_id"), ["user_id"], unique=False)
    with op.batch_alter_table("connector_identities", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cards", sa.String(length=10), nullable=True))
        batch_op.create_check_constraint("ck_connector_identities_cards", sa.column("cards").in_(CARDS))


def downgrade():
    with op.batch_alter_table("connector_identities", schema=None) as batch_op:
        batch_op.drop_constraint("ck_connector_identities_cards", type_="check")
        batch_op.drop_column("cards")
    with op.batch_alter_table("link_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_link_codes_user_id"))
    op.drop_table("link_codes")
