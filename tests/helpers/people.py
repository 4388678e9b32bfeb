"""People and credentials some tests add beside the demo's: another tenant's admin, an agent's token."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Tenant, User
from tests.conftest import api_headers


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


def agent_asks(app, posts, title="Launch notes"):
    """An agent token (ci-bot) asks for a delete through the API, as alice's agent."""
    token = agent_token(app, "ci-bot")
    conversation = app.test_client().post("/api/conversations", json={}, headers=api_headers(token)).get_json()["id"]
    response = app.test_client().post(
        f"/api/conversations/{conversation}/messages",
        json={"text": f"/delete_post post={posts[title]}"},
        headers={**api_headers(token), "Prefer": "respond-async"},
    )
    assert response.status_code == 202, response.get_data(as_text=True)
