"""Chat connectors: verified webhooks in, messages out, reply-to-confirm (DESIGN §3.3).
Each connector is one shape (base.Connector: verify, parse, send) behind one webhook view.
Webhooks answer at once; the delivery is a job, and so is the turn it starts (app.copilot.call);
when a turn of a connector's conversation ends, its messages are posted into the thread."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Flask, abort, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError

from app import copilot
from app.connectors import presses, push, slack
from app.connectors.base import Inbound, Unverified, post_messages
from app.connectors.dedupe import claim, release
from app.connectors.receive import receive
from app.connectors.services import CONNECTORS
from app.copilot import audit
from app.extensions import core, csrf, db
from app.models import ConnectorThread

log = logging.getLogger(__name__)
bp = Blueprint("connectors", __name__)
csrf.exempt(bp)


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
        copilot.call("app.connectors:process", asdict(inbound))
    except RedisError:
        process(asdict(inbound))


def post_turn(conversation_id: int, message_ids: list[int]) -> None:
    """The job after a turn of a connector's conversation ends: post its messages in the thread."""
    thread = db.session.scalar(sa.select(ConnectorThread).where(ConnectorThread.conversation_id == conversation_id))
    if thread is not None and thread.connector in CONNECTORS:
        post_messages(CONNECTORS[thread.connector], thread, message_ids)


def init_app(app: Flask) -> None:
    """Post a connector thread's reply when a turn of its conversation ends; send a card to its
    person's linked chats when they chose so (app.connectors.push)."""
    copilot.listen(app, _turn_ended)
    copilot.listen_cards(app, push.cards_asked)
    copilot.listen_countersign(app, push.countersign_asked)
    copilot.listen_decided(app, push.card_decided)
    app.extensions.setdefault("links.linked", []).append(push.account_linked)


_THREAD_OF = sa.select(ConnectorThread.id).where(ConnectorThread.conversation_id == sa.bindparam("conversation_id"))


def _turn_ended(conversation_id: int, added: list[Any]) -> None:
    """A turn listener (copilot.listen): queue the posting of a connector thread's reply."""
    if added and core(_THREAD_OF, {"conversation_id": conversation_id}).scalar():
        copilot.call("app.connectors:post_turn", conversation_id, [m.id for m in added])


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


def json_object() -> dict[str, Any]:
    """The verified body as a JSON object; anything else (not JSON, too deep, NaN, a list) is a 400."""
    try:
        data = current_app.json.loads(request.get_data() or b"{}")
    except ValueError:
        abort(400)
    if not isinstance(data, dict):
        abort(400)
    return data


def webhook(name: str) -> ResponseReturnValue:
    """Every connector's webhook: the sender proved before anything else is read, then the URL
    check a service may make, then the person's message accepted (queued) and acknowledged at once."""
    connector = CONNECTORS[name]
    try:
        connector.verify(request)
    except Unverified as refused:
        log.warning("%s webhook refused: %s", name, refused.why)
        abort(refused.status)
    payload = json_object()
    answer = connector.handshake(payload)
    if answer is not None:
        return jsonify(answer)
    press = connector.press(payload)
    if press is not None:  # a card's button (Telegram's callback query)
        presses.queue(press)
        return connector.acknowledge()
    inbound = connector.parse(payload)
    if inbound is not None:
        accept(inbound)
    return connector.acknowledge()


@bp.post("/slack/interactions")
def slack_interactions() -> ResponseReturnValue:
    """Slack's interactivity URL: a press of a card's button, signed like every Slack request
    (verified before the body is read), queued, and acknowledged at once."""
    connector = CONNECTORS["slack"]
    assert isinstance(connector, slack.Slack)
    try:
        connector.verify(request)
    except Unverified as refused:
        log.warning("slack interaction refused: %s", refused.why)
        audit.record_now(
            "connector.refused", "unverified_press", tenant_id=None, user_id=None, detail=refused.why, channel="slack"
        )
        abort(refused.status)
    press = connector.interaction(request.get_data(as_text=True))
    if press is not None:
        presses.queue(press)
    return ("", 200)


for _connector in CONNECTORS.values():  # POST /connectors/telegram, /connectors/slack/events, /connectors/email/inbound
    bp.add_url_rule(_connector.path, _connector.name, webhook, methods=["POST"], defaults={"name": _connector.name})
