"""Token scopes, server-side browser sessions, the credential a card and a run came from

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 10:40:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
