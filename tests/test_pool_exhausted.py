"""A request that finds no pooled connection free within the pool's timeout: every one held, as by
requests waiting for a lock another process holds past SQLite's busy timeout (a helper's attack,
2026-12-07: a lock held 36 s, and 49 of 100 messages answered 500, an internal error). It is the
503 of a database that is briefly away: nothing kept, and the client told to try again."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Conversation, User
from tests.conftest import api_headers


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"SQLALCHEMY_ENGINE_OPTIONS": {"pool_size": 1, "max_overflow": 0, "pool_timeout": 1}}


def test_a_request_that_finds_no_free_connection_is_a_503_that_keeps_nothing(app):
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(alice, scope="client"))
        before = db.session.scalar(sa.select(sa.func.count(Conversation.id)))
        db.session.remove()
        held = db.engine.connect()  # (the pool's only connection)
    try:
        answer = app.test_client().post("/api/conversations", json={}, headers=headers)
    finally:
        held.close()
    assert answer.status_code == 503, answer.get_data(as_text=True)
    assert answer.get_json()["error"] == "ServiceUnavailable" and answer.headers["Retry-After"] == "1"
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Conversation.id))) == before
