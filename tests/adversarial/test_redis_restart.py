"""Redis stopped, then restarted empty, under a running app: web cards never depend on it. Rate
limits fall back to the process's memory while it is down, and go back to Redis once it answers.
(Chat threads waiting on Redis are tested in tests/test_connectors.py.)"""

from __future__ import annotations

import time

import pytest
import redis
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval
from tests.services import PrivateRedis


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def app_config(private_redis):
    return {"REDIS_URL": private_redis.url, "RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": private_redis.url}


def test_redis_stopped_then_restarted_empty_web_cards_still_work(app, alice, posts, handle_calls, private_redis):
    convo = alice.new_conversation()
    first = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert redis.Redis.from_url(private_redis.url).keys("LIMITS*"), "the limiter should count in this Redis"

    private_redis.stop()
    second = alice.card(alice.say(convo, f"/delete_post post={posts['Launch notes']}"))  # asked while it is down
    assert alice.answer(*second).status_code == 200

    private_redis.start()  # back, and empty
    assert alice.answer(*first).status_code == 200
    assert handle_calls["n"] == 2
    with app.app_context():
        assert set(db.session.scalars(sa.select(Approval.status))) == {"done"}

    # The limiter notices Redis is back (it retries with a growing back-off) and counts there again.
    # Its back-off doubles with each check made while Redis was down, up to 32 s (flask-limiter's
    # MAX_BACKEND_CHECKS): the slower the machine, the more checks, so wait past the longest.
    deadline = time.monotonic() + 60
    while not redis.Redis.from_url(private_redis.url).keys("LIMITS*"):
        assert time.monotonic() < deadline, "rate limits never went back to Redis"
        assert alice.htmx_post(f"/c/{convo}/messages", text="").status_code == 204
        time.sleep(0.5)
