"""Chat connectors: verified webhooks in, messages out, reply-to-confirm (DESIGN §3.3).
Webhooks answer at once; the delivery is a job, and so is the turn it starts (app.copilot.jobs);
when a turn of a connector's conversation ends, its messages are posted into the thread."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, current_app, jsonify, request
from redis.exceptions import RedisError

from app.connectors import email, slack, telegram
from app.connectors.base import Connector, Inbound, claim, post_messages, receive, release
from app.copilot import jobs, runs
from app.extensions import csrf, db
from app.models import ConnectorThread

log = logging.getLogger(__name__)
bp = Blueprint("connectors", __name__)
csrf.exempt(bp)

CONNECTORS: dict[str, Connector] = {c.name: c for c in (telegram.Telegram(), slack.Slack(), email.Email())}


def process(inbound: dict[str, Any]) -> str:
    """The job: handle one inbound message (in the job's app context)."""
    if inbound.get("connector") == "email" and "unproven" not in inbound:
        # Queued by a process from before senders were checked: nothing proves who sent it.
        inbound = {**inbound, "unproven": "queued before senders were checked"}
    message = Inbound(**inbound)
    return receive(CONNECTORS[message.connector], message)


def dispatch(inbound: Inbound) -> None:
    """Queue the delivery as a job, so the webhook can answer at once. No queue without Redis:
    it is handled now, and receive() tells the person to retry what needs Redis."""
    try:
        jobs.call("app.connectors:process", asdict(inbound))
    except RedisError:
        process(asdict(inbound))


def post_turn(conversation_id: int, message_ids: list[int]) -> None:
    """The job after a turn of a connector's conversation ends: post its messages in the thread."""
    thread = db.session.scalar(sa.select(ConnectorThread).where(ConnectorThread.conversation_id == conversation_id))
    if thread is not None and thread.connector in CONNECTORS:
        post_messages(CONNECTORS[thread.connector], thread, message_ids)


def _turn_ended(conversation_id: int, added: list[Any]) -> None:
    """A turn listener (runs.LISTENERS): queue the posting of a connector thread's reply."""
    if added and db.session.scalar(sa.select(ConnectorThread.id).where(ConnectorThread.conversation_id == conversation_id)):
        jobs.call("app.connectors:post_turn", conversation_id, [m.id for m in added])


runs.LISTENERS.append(_turn_ended)


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
