"""Rate limits live in the real Redis (REDIS_URL), shared by every process."""

from __future__ import annotations

import re

import pytest

from app.extensions import limiter
from tests.conftest import REDIS_URL


@pytest.fixture
def app_config():
    return {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL}


def test_sign_in_attempts_are_limited_in_redis(app):
    import redis

    with app.app_context():
        limiter.reset()
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    form = {"email": "alice@example.com", "password": "wrong", "csrf_token": csrf}
    codes = [client.post("/login", data=form).status_code for _ in range(11)]
    assert codes == [200] * 10 + [429]
    keys = redis.Redis.from_url(REDIS_URL).keys("LIMITS*")
    assert keys, "the limiter kept no counter in Redis"
    with app.app_context():
        limiter.reset()
