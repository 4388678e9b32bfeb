"""People and credentials some tests add beside the demo's: another tenant's admin, an agent's token."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Tenant, User


@pytest.fixture
def globex_admin(app):
    with app.app_context():
        globex = db.session.scalar(sa.select(Tenant).where(Tenant.slug == "globex"))
        admin = User(
            tenant_id=globex.id,
            email="dave@globex.example",
            is_admin=True,
            password_hash=db.session.scalar(sa.select(User.password_hash).limit(1)),
        )
        db.session.add(admin)
        db.session.commit()
    return "dave@globex.example"


def agent_token(app, name="laptop", email="alice@example.com"):
    with app.app_context():
        return create_token(db.session.scalar(sa.select(User).where(User.email == email)), name=name, scope="agent")
