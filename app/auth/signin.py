"""Sign-in's defences. Failed sign-ins block their source address (Flask-Limiter, in login_page)
but only slow an account down, and never at an address where that account recently signed in nor
from a browser holding the account's device cookie (OWASP's device cookies): a stranger's guesses
cannot lock the person out of a device they have signed in on. An unknown email costs one password
hash, as a known one does, so the answer's timing does not say whether the account exists."""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import secrets
import time

from flask import current_app, request, url_for
from itsdangerous import BadData, URLSafeTimedSerializer
from redis.exceptions import RedisError
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response

from app.extensions import redis_client
from app.models import User

log = logging.getLogger(__name__)
FAILURES_KEPT = 15 * 60  # seconds without a failure after which an account's count starts again
KNOWN_FOR = 30 * 24 * 3600  # how long an address where the account signed in stays exempt
DEVICE_COOKIE = "countersign_device"
DEVICE_SALT = "countersign.signin-device"  # its own: no session cookie or card token passes for one
DEVICE_KEPT = 365 * 24 * 3600  # a device cookie's life; every sign-in on the device renews it
DEVICE_TRIES = 10  # sign-ins a device cookie exempts: a stolen copy gives at most this many guesses


@functools.cache
def _dummy_hash() -> str:
    """A hash of a random password, made like every real one (werkzeug's default scrypt)."""
    return generate_password_hash(secrets.token_urlsafe(16))


def password_matches(user: User | None, password: str) -> bool:
    """Exactly one password hash check, whether or not the account exists."""
    stored = user.password_hash if user is not None and user.password_hash else _dummy_hash()
    matched = check_password_hash(stored, password)
    return matched and user is not None and bool(user.password_hash)


def _account(email: str) -> str:
    """The account's name in Redis and in device cookies (known or not: the same either way)."""
    return hashlib.sha256(email.encode()).hexdigest()[:32]


def _keys(email: str) -> tuple[str, str, str]:
    """Redis keys for an account and this request's address."""
    account = _account(email)
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


def failed(email: str, device: str | None = None) -> None:
    """One more failure for the account: past SIGNIN_SLOWDOWN_AFTER, each one doubles the wait. A
    try on a device cookie counts against that device only (device_try counted it)."""
    if device is not None:
        return
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


def succeeded(email: str, device: str | None = None) -> None:
    """The account signed in here: its count starts again, this address is exempt from now on, and
    the device cookie presented (if any) is spent: remember_device gives the browser a new one."""
    failures, known, address = _keys(email)
    try:
        redis = redis_client.client
        redis.delete(failures)
        redis.sadd(known, address)
        redis.expire(known, KNOWN_FOR)
        if device is not None:
            redis.set(_device_key(device), DEVICE_TRIES, ex=DEVICE_KEPT)
    except RedisError as error:
        log.warning("sign-in slow-down unavailable (redis): %s", error)


def _device_serializer() -> URLSafeTimedSerializer:
    """Signed with the app's keys (old ones still read during a rotation) under the device salt."""
    keys = [*current_app.config.get("SECRET_KEY_FALLBACKS", []), current_app.config["SECRET_KEY"]]
    return URLSafeTimedSerializer(keys, salt=DEVICE_SALT)


def _device_key(device: str) -> str:
    return f"signin:device:{device}"


def device_try(email: str) -> str | None:
    """This browser's device, when it holds a valid device cookie for this account with tries left:
    the attempt is then exempt from the account's slow-down. Uses one try, atomically, so that
    guesses sent at once with a stolen cookie cannot share the last one."""
    try:
        data = _device_serializer().loads(request.cookies.get(DEVICE_COOKIE, ""), max_age=DEVICE_KEPT)
    except BadData:
        return None
    if not isinstance(data, dict) or data.get("a") != _account(email) or not isinstance(data.get("d"), str):
        return None
    device = data["d"]
    try:
        redis = redis_client.client
        tries = int(redis.incr(_device_key(device)))
        redis.expire(_device_key(device), DEVICE_KEPT)
    except RedisError as error:
        log.warning("sign-in device cookies unavailable (redis): %s", error)
        return None
    return device if tries <= DEVICE_TRIES else None


def remember_device(response: Response, email: str) -> Response:
    """Give the browser a new device cookie for this account (sent only to the sign-in page)."""
    value = _device_serializer().dumps({"a": _account(email), "d": secrets.token_urlsafe(16)})
    response.set_cookie(
        DEVICE_COOKIE,
        value,
        max_age=DEVICE_KEPT,
        path=url_for("auth.login_page"),
        secure=bool(current_app.config["SESSION_COOKIE_SECURE"]),
        httponly=True,
        samesite="Lax",
    )
    return response
