"""The connector contract and the one conversation flow every connector shares: map the sender,
intercept a reply to a waiting card (DESIGN §3.3), or run the agent and post what it says."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import current_app
from redis.exceptions import RedisError

from app.copilot import agent, approvals
from app.copilot.approvals import Actor
from app.errors import CountersignError
from app.extensions import db, redis_client
from app.models import Approval, ConnectorIdentity, ConnectorThread, Conversation, Message, utcnow

log = logging.getLogger(__name__)

RETRY = "I couldn't check your confirmation — try again in a moment, or use the link: {link}"
UNKNOWN = "Sorry, I don't know who you are here. Ask an admin to link your account to Countersign."
OUTCOMES = {
    "declined": "Declined — nothing was done.",
    "expired": "Expired — nothing was done.",
    "revoked": "Revoked by an admin — nothing was done.",
    "changed": "Changed since you were asked — nothing was done.",
    "refused": "Not allowed any more — nothing was done.",
    "superseded": "Replaced by a newer request — nothing was done.",
}


@dataclass
class Inbound:
    """One verified message from a chat thread."""

    connector: str
    thread_key: str
    sender: str
    text: str
    event_id: str
    has_files: bool = False
    address: str = ""  # where replies go (email)
    subject: str = ""

    def __post_init__(self) -> None:
        # U+0000 cannot be stored in PostgreSQL text: drop it from whatever a chat service sends.
        for name in ("thread_key", "sender", "text", "event_id", "address", "subject"):
            setattr(self, name, str(getattr(self, name)).replace("\x00", ""))


class Connector:
    """A chat service: `send()` posts into a thread. Verification and parsing live in each
    connector's webhook view."""

    name = ""

    def send(self, thread: ConnectorThread, text: str) -> None:
        raise NotImplementedError

    @property
    def confirms_by_reply(self) -> bool:
        return self.name in current_app.config["CONNECTORS_CONFIRM_BY_REPLY"]


def _text(value: Any) -> str:
    """A Redis reply as text ("" for none)."""
    return value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else ""


def wait_key(connector: str, thread_key: str) -> str:
    return f"awaiting_confirm:{connector}:{thread_key}"


def first_line(text: str) -> str:
    """The first non-empty line that is not quoted history."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(">"):
            return stripped
    return ""


def receive(connector: Connector, inbound: Inbound) -> str:
    """Handle one inbound message; returns what happened (for logs and tests)."""
    redis = redis_client.client
    try:
        if not redis.set(f"seen:{inbound.connector}:{inbound.event_id}", 1, nx=True, ex=86400):
            return "duplicate"
        identity = _identity(inbound)
        if identity is None:
            _send_raw(connector, inbound, UNKNOWN)
            return "unknown sender"
        thread = _thread(inbound, identity)
        waiting = _text(redis.get(wait_key(inbound.connector, inbound.thread_key)))
        if waiting:
            outcome = _reply(connector, inbound, thread, waiting, identity)
            if outcome is not None:
                return outcome
        return _converse(connector, inbound, thread, identity)
    except RedisError as error:
        log.warning("redis unavailable for %s: %s", inbound.connector, error)
        db.session.rollback()
        _send_raw(connector, inbound, RETRY.format(link=_latest_link(inbound)))
        return "redis down"


def _identity(inbound: Inbound) -> ConnectorIdentity | None:
    return db.session.scalar(sa.select(ConnectorIdentity).where(
        ConnectorIdentity.connector == inbound.connector, ConnectorIdentity.external_id == inbound.sender))


def _thread(inbound: Inbound, identity: ConnectorIdentity) -> ConnectorThread:
    thread = db.session.scalar(sa.select(ConnectorThread).where(
        ConnectorThread.connector == inbound.connector, ConnectorThread.thread_key == inbound.thread_key,
        ConnectorThread.user_id == identity.user_id))
    if thread is None:
        user = identity.user
        conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id,
                                    title=f"{inbound.connector}: {inbound.text.strip()[:40] or 'thread'}")
        db.session.add(conversation)
        db.session.flush()
        thread = ConnectorThread(connector=inbound.connector, thread_key=inbound.thread_key, user_id=user.id,
                                 conversation_id=conversation.id, address=inbound.address, subject=inbound.subject)
        db.session.add(thread)
        db.session.commit()
    return thread


def _reply(connector: Connector, inbound: Inbound, thread: ConnectorThread, approval_id: str,
           identity: ConnectorIdentity) -> str | None:
    """A message on a thread with a waiting card: only its person's reply counts; a file alone
    keeps the wait open; "yes" confirms through approvals, anything else declines."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.user_id != identity.user_id:
        return None  # someone else's message in the thread: an ordinary one
    if not first_line(inbound.text):
        return "file only: still waiting" if inbound.has_files else None
    redis = redis_client.client
    if not redis.delete(wait_key(inbound.connector, inbound.thread_key)):
        return None  # another delivery consumed it first
    decision = "confirm" if first_line(inbound.text).lower() == "yes" else "decline"
    binding = f"{inbound.connector}:{inbound.thread_key}"
    token = approvals.sign(approval, binding)
    actor = Actor(user=identity.user, binding=binding, channel=inbound.connector)
    try:
        decided, added = agent.answer(approval.id, token, actor, decision)
        status = decided.status
    except CountersignError as error:
        db.session.rollback()
        current = db.session.get(Approval, approval_id)
        status, added = (current.status if current else "expired"), []
        if status == "pending":
            connector.send(thread, error.message)
            return "refused"
    connector.send(thread, _outcome(status, approval_id))
    _post(connector, thread, added)
    return f"{decision}: {status}"


def _outcome(status: str, approval_id: str) -> str:
    if status == "done":
        approval = db.session.get(Approval, approval_id)
        return (approval.result if approval and approval.result else "Done.")
    if status == "failed":
        return "It failed — nothing else was done."
    return OUTCOMES.get(status, f"{status.capitalize()} — nothing was done.")


def _converse(connector: Connector, inbound: Inbound, thread: ConnectorThread, identity: ConnectorIdentity) -> str:
    if not inbound.text.strip():
        return "nothing to say"
    conversation = db.session.get(Conversation, thread.conversation_id)
    assert conversation is not None
    added = agent.send_message(conversation, identity.user, inbound.text[:4000], channel=inbound.connector)
    _post(connector, thread, added[1:])
    return "message"


def _post(connector: Connector, thread: ConnectorThread, messages: list[Message]) -> None:
    for message in messages:
        if message.approval is not None:
            post_card(connector, thread, message.approval)
        elif message.text:
            connector.send(thread, message.text)


def post_card(connector: Connector, thread: ConnectorThread, approval: Approval) -> None:
    """Ask in the thread, or, where this connector may not take "yes" (or it is a form), link
    to the card in the web app: nothing risky runs unasked (fail closed)."""
    if approval.type != "confirm" or not connector.confirms_by_reply:
        connector.send(thread, f"Please answer this in Countersign: {approvals.card_url(approval.id)}")
        return
    redis = redis_client.client
    key = wait_key(connector.name, thread.thread_key)
    remaining = int((approval.expires_at - utcnow()).total_seconds())
    ttl = max(1, min(remaining, int(current_app.config["CONNECTOR_CONFIRM_TTL"])))
    previous = _text(redis.set(key, approval.id, ex=ttl, get=True))
    if previous and previous != approval.id:
        agent.supersede(previous, connector.name)
    rows = "".join(f"\n{row['label']}: {row['value']}" for row in approval.rows)
    connector.send(thread, f"⚠️ {approval.reason} Reply 'Yes' to confirm.{rows}")


def _latest_link(inbound: Inbound) -> str:
    """A link to the sender's newest pending card, for when Redis cannot be asked."""
    identity = _identity(inbound)
    if identity is None:
        return approvals.card_url("")
    approval = db.session.scalar(sa.select(Approval).where(
        Approval.user_id == identity.user_id, Approval.status == "pending").order_by(Approval.created_at.desc()))
    return approvals.card_url(approval.id) if approval else current_app.config["PUBLIC_URL"]


def _send_raw(connector: Connector, inbound: Inbound, text: str) -> None:
    """Answer on a thread that may not have a conversation yet."""
    connector.send(ConnectorThread(connector=inbound.connector, thread_key=inbound.thread_key,
                                   address=inbound.address, subject=inbound.subject, user_id=0,
                                   conversation_id=0), text)
