"""A delivery acts once: chat services redeliver (Slack retries, a repeated Telegram update, a
replayed signed email), so each delivery is held in Redis under its event id while it is worked
on, and marked done for a day once its work is committed.

A delivery is held for six minutes while its job is queued or running (the job stores the message
and queues the turn, which runs as a job of its own, so it is short). A delivery job that raises
lets go at once, so a redelivery is processed; one that ends marks it done, so a redelivery acts
once."""

from __future__ import annotations

import secrets

from redis.exceptions import RedisError

from app.connectors.base import Inbound, text_of
from app.extensions import redis_client

LEASE = 360
DONE_FOR = 86400
DONE = "done"


def seen_key(inbound: Inbound) -> str:
    return f"seen:{inbound.connector}:{inbound.event_id}"


def claim(inbound: Inbound) -> bool:
    """At the webhook: hold this delivery while its turn is queued (LEASE). False when it is held
    already or done: a redelivery, acknowledged and not queued again."""
    token = secrets.token_hex(8)
    if not redis_client.client.set(seen_key(inbound), token, nx=True, ex=LEASE):
        return False
    inbound.claim = token
    return True


def hold(inbound: Inbound) -> bool:
    """In the job: whether this delivery is still ours (renewed for the run), or free again after
    its lease ran out (taken). Another holder, or done: a duplicate."""
    redis = redis_client.client
    key = seen_key(inbound)
    if inbound.claim and text_of(redis.get(key)) == inbound.claim:
        return bool(redis.set(key, inbound.claim, xx=True, ex=LEASE))
    inbound.claim = secrets.token_hex(8)
    return bool(redis.set(key, inbound.claim, nx=True, ex=LEASE))


def done(inbound: Inbound) -> None:
    """The turn's work is committed: a redelivery from now on acts once (is dropped)."""
    redis_client.client.set(seen_key(inbound), DONE, ex=DONE_FOR)


def release(inbound: Inbound) -> bool:
    """The turn raised before its work was committed: let a redelivery process it. False when
    this delivery was not held (done already: its work was committed) or Redis was away (the
    lease runs out on its own)."""
    try:
        redis = redis_client.client
        if text_of(redis.get(seen_key(inbound))) == inbound.claim:
            redis.delete(seen_key(inbound))
            return True
    except RedisError:
        pass
    return False
