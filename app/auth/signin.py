"""Sign-in's defences. Failed sign-ins block their source address (Flask-Limiter, in login_page)
but only slow an account down, and never at an address where that account recently signed in:
a stranger's guesses cannot lock the person out. An unknown email costs one password hash, as
a known one does, so the answer's timing does not say whether the account exists."""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import secrets
import time

from flask import current_app, request
from redis.exceptions import RedisError
from werkzeug.security import check_password_hash, generate_password_hash

from app.extensions import redis_client
from app.models import User

log = logging.getLogger(__name__)
FAILURES_KEPT = 15 * 60  # seconds without a failure after which an account's count starts again
KNOWN_FOR = 30 * 24 * 3600  # how long an address where the account signed in stays exempt


@functools.cache
def _dummy_hash() -> str:
    """A hash of a random password, made like every real one (werkzeug's default scrypt)."""
    return generate_password_hash(secrets.token_urlsafe(16))


def password_matches(user: User | None, password: str) -> bool:
    """Exactly one password hash check, whether or not the account exists."""
    stored = user.password_hash if user is not None and user.password_hash else _dummy_hash()
    matched = check_password_hash(stored, password)
    return matched and user is not None and bool(user.password_hash)


def _keys(email: str) -> tuple[str, str, str]:
    """Redis keys for an account (known or not: the same either way) and this request's address."""
    account = hashlib.sha256(email.encode()).hexdigest()[:32]
    address = hashlib.sha256((request.remote_addr or "").encode()).hexdigest()[:32]
    return f"signin:failures:{account}", f"signin:known:{account}", address


def seconds_to_wait(email: str) -> int:
    """How long this address must wait before trying this account again (0: try now)."""
    failures, known, address = _keys(email)
    try:
        redis = redis_client.client
        if redis.sismember(known, address):
            return 0
        until = float(redis.hget(failures, "until") or 0)
    except RedisError as error:
        log.warning("sign-in slow-down unavailable (redis): %s", error)
        return 0
    return max(0, math.ceil(until - time.time()))


def failed(email: str) -> None:
    """One more failure for the account: past SIGNIN_SLOWDOWN_AFTER, each one doubles the wait."""
    failures, _, _ = _keys(email)
    after, cap = current_app.config["SIGNIN_SLOWDOWN_AFTER"], current_app.config["SIGNIN_SLOWDOWN_CAP"]
    try:
        redis = redis_client.client
        count = int(redis.hincrby(failures, "count", 1))
        if count >= after:
            redis.hset(failures, "until", time.time() + min(cap, 2 ** min(count - after, 30)))
        redis.expire(failures, FAILURES_KEPT)
    except RedisError as error:
        log.warning("sign-in slow-down unavailable (redis): %s", error)


def succeeded(email: str) -> None:
    """The account signed in here: its count starts again and this address is exempt from now on."""
    failures, known, address = _keys(email)
    try:
        redis = redis_client.client
        redis.delete(failures)
        redis.sadd(known, address)
        redis.expire(known, KNOWN_FOR)
    except RedisError as error:
        log.warning("sign-in slow-down unavailable (redis): %s", error)
