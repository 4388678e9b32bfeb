"""Two hosts (two gunicorn processes on their own ports) share one database and one Redis: a card
made through one is confirmed through the other, and 32 confirms spread over both run it once."""

from __future__ import annotations

import os
import threading

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import AuditEvent, Post, User
from tests.conftest import REDIS_URL
from tests.services import call, gunicorn_hosts


@pytest.fixture
def hosts(app, database_url):
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "testing",
        "SECRET_KEY": "test-secret-key",
        "DATABASE_URL": database_url,
        "REDIS_URL": REDIS_URL,
        "SWEEP_ON_START": "0",
        "RATELIMIT_ENABLED": "0",
    }
    with gunicorn_hosts(env, count=2) as ports:
        yield ports


def test_a_card_made_on_one_host_is_confirmed_once_across_both(app, hosts, posts):
    a, b = hosts
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), scope="client")
    _, convo = call(a, "POST", "/api/conversations", token)
    _, turn = call(
        a, "POST", f"/api/conversations/{convo['id']}/messages", token, {"text": f"/delete_post post={posts['Spring meetup']}"}
    )
    prompt = turn["pending"][0]
    start, codes, lock = threading.Barrier(32), [], threading.Lock()

    def press(port):
        start.wait()
        status, _ = call(port, "POST", f"/api/approvals/{prompt['id']}/confirm", token, {"token": prompt["token"]})
        with lock:
            codes.append(status)

    threads = [threading.Thread(target=press, args=(hosts[i % 2],)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] + [409] * 31
    with app.app_context():
        done = db.session.scalars(
            sa.select(AuditEvent.outcome).where(AuditEvent.approval_id == prompt["id"], AuditEvent.event == "approval.decided")
        ).all()
        assert done == ["done"]  # decided once, by one process on one host
        assert db.session.get(Post, posts["Spring meetup"]) is None
