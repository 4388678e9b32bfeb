"""Chat connectors: verified webhooks in, messages out, reply-to-confirm (DESIGN §3.3).
Webhooks answer at once; the turn runs in an RQ worker (a thread when REDIS_URL is unset)."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from typing import Any

from flask import Blueprint, Flask, abort, current_app, jsonify, request
from redis.exceptions import RedisError

from app.connectors import email, slack, telegram
from app.connectors.base import Connector, Inbound, claim, receive, release
from app.extensions import csrf, redis_client

log = logging.getLogger(__name__)
bp = Blueprint("connectors", __name__)
csrf.exempt(bp)

CONNECTORS: dict[str, Connector] = {c.name: c for c in (telegram.Telegram(), slack.Slack(), email.Email())}


def process(inbound: dict[str, Any]) -> str:
    """The job: handle one inbound message in an app context (the worker's, or a new one)."""
    from flask import has_app_context

    if inbound.get("connector") == "email" and "unproven" not in inbound:
        # Queued by a process from before senders were checked: nothing proves who sent it.
        inbound = {**inbound, "unproven": "queued before senders were checked"}
    message = Inbound(**inbound)
    if has_app_context():
        return receive(CONNECTORS[message.connector], message)
    from app import create_app

    with create_app().app_context():
        return receive(CONNECTORS[message.connector], message)


def dispatch(inbound: Inbound) -> None:
    """Queue the turn for a worker, so the webhook can answer at once."""
    if current_app.config.get("REDIS_URL"):
        from rq import Queue

        try:
            Queue("countersign", connection=redis_client.client).enqueue(process, asdict(inbound), job_timeout=300)
            return
        except RedisError:
            # No queue without Redis: answer now, and receive() tells the person to retry.
            process(asdict(inbound))
            return
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]

    def run() -> None:
        with app.app_context():
            process(asdict(inbound))

    threading.Thread(target=run, name=f"connector-{inbound.connector}", daemon=True).start()


def accept(inbound: Inbound) -> None:
    """Queue a new delivery. One already queued, running or done is acknowledged and dropped:
    redeliveries act once, and one whose turn raised is free to be processed again."""
    try:
        if not claim(inbound):
            return
    except RedisError:
        pass  # receive() finds Redis down, runs nothing, and tells the person
    try:
        dispatch(inbound)
    except Exception:
        release(inbound)  # not queued: the provider's retry of this failed request is processed
        raise


def raw_json() -> dict[str, Any]:
    try:
        data = current_app.json.loads(request.get_data() or b"{}")  # strict: too deep, NaN … are a 400
    except ValueError:
        abort(400)
    if not isinstance(data, dict):
        abort(400)
    return data


@bp.post("/telegram")
def telegram_webhook() -> Any:
    """Telegram's webhook: verified by the secret_token header before the body is read."""
    if not telegram.verified(request.headers):
        abort(403)
    inbound = telegram.parse(raw_json())
    if inbound is not None:
        accept(inbound)
    return jsonify(ok=True)


@bp.post("/slack/events")
def slack_events() -> Any:
    """Slack's Events API: signature and timestamp first; url_verification; ack, then work."""
    body = request.get_data()
    ok, why = slack.verified(request.headers, body)
    if not ok:
        log.warning("slack webhook refused: %s", why)
        abort(401)
    payload = raw_json()
    if payload.get("type") == "url_verification":
        return jsonify(challenge=payload.get("challenge", ""))
    inbound = slack.parse(payload)
    if inbound is not None:
        accept(inbound)
    return ("", 200)


@bp.post("/email/inbound")
def email_inbound() -> Any:
    """The mail provider's inbound webhook (JSON): its HMAC over timestamp and body first."""
    ok, why = email.verified(request.headers, request.get_data())
    if not ok:
        log.warning("email webhook refused: %s", why)
        abort(401)
    inbound = email.parse(raw_json())
    if inbound is not None:
        accept(inbound)
    return jsonify(ok=True)
