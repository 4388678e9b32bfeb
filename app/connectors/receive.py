"""One verified message, once, the same for every connector: map the sender, let it answer the
card it proves it answers (DESIGN §3.3), or run a turn of the thread's conversation."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from flask import current_app
from redis.exceptions import RedisError

from app import copilot
from app.auth import links
from app.connectors import dedupe
from app.connectors.base import KEEP_FOR, Connector, Inbound, keep_wait_key, text_of, wait_key, wait_ttl
from app.copilot import audit, conversations
from app.copilot.approvals import REASON_MAX, Actor, ChannelProof, Prompt, card_url, prompt_for, recover
from app.copilot.text import check_message
from app.errors import CountersignError
from app.extensions import DATABASE_AWAY, db, redis_client
from app.models import Approval, ConnectorIdentity, ConnectorThread, Conversation, utcnow
from app.status import OUTCOMES, Decision, Status

log = logging.getLogger(__name__)

RETRY = "I couldn't check your confirmation — try again in a moment, or use the link: {link}"
SEND_AGAIN = "Countersign is briefly unavailable, so nothing was done with your message. Please send it again in a moment."
UNKNOWN = (
    "Sorry, I don't know who you are here. Link this account on Countersign's Linked channels page, or ask an admin to link it."
)


def receive(connector: Connector, inbound: Inbound) -> str:
    """Handle one inbound message once; returns what happened (for logs and tests)."""
    if inbound.unproven:
        return _refuse_sender(inbound)
    try:
        if not dedupe.hold(inbound):
            return "duplicate"
        outcome = _receive(connector, inbound)
    except RedisError as error:
        log.warning("redis unavailable for %s: %s", inbound.connector, error)
        db.session.rollback()
        _send_raw(connector, inbound, _unchecked(inbound))
        return "redis down"
    except DATABASE_AWAY as error:  # (its webhook was answered already: the person is told here)
        log.warning("database unavailable for %s: %s", inbound.connector, error)
        db.session.rollback()
        if not dedupe.release(inbound):  # (done: its message was kept before the database went)
            raise
        _send_raw(connector, inbound, SEND_AGAIN)
        return "database down"
    except Exception:
        dedupe.release(inbound)
        raise
    dedupe.done(inbound)
    return outcome


def first_line(text: str) -> str:
    """The first non-empty line that is not quoted history."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(">"):
            return stripped
    return ""


def decline_reason(text: str) -> str:
    """A reply that declines, as the reason the model reads: its own lines, without quoted history
    ("> " lines, and everything from an email client's "On … wrote:" line down), cut to the limit."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(">"):
            continue
        if stripped.startswith("On ") and stripped.endswith("wrote:"):
            break
        lines.append(line.rstrip())
    said = "\n".join(lines).strip()
    return said if len(said) <= REASON_MAX else said[: REASON_MAX - 1] + "…"


def _refuse_sender(inbound: Inbound) -> str:
    """A message whose sender the channel could not prove is from nobody: no turn, no answer to a
    card, and no reply (a forged From would turn it into mail to someone who never wrote). Kept in
    the audit log of the person it named, without its words."""
    try:
        if not dedupe.hold(inbound):
            return "duplicate"
    except RedisError:
        pass  # not deduplicated, only recorded: nothing else happens either way
    identity = _identity(inbound)
    log.warning("%s message refused, sender %r not proven: %r", inbound.connector, inbound.sender, inbound.unproven)
    audit.record_now(
        "connector.refused",
        "unauthenticated_sender",
        tenant_id=identity.user.tenant_id if identity else None,
        user_id=None,
        detail=f"from {inbound.sender}: {inbound.unproven}",
        channel=inbound.connector,
    )
    try:
        dedupe.done(inbound)  # a redelivery is not recorded again
    except RedisError:
        pass  # the webhook's hold runs out on its own
    return "refused: unproven sender"


def _receive(connector: Connector, inbound: Inbound) -> str:
    """The sender's own wait, if this message proves it answers it; otherwise a conversation turn,
    which may not replace a wait it did not prove it may answer."""
    code = connector.link_code(inbound)
    if code is not None:  # a one-time code from the person's settings page: it links nothing by itself
        _send_raw(connector, inbound, links.claim(inbound.connector, inbound.sender, inbound.sender_name, code))
        return "link code"
    identity = _identity(inbound)
    if identity is None:
        _send_raw(connector, inbound, UNKNOWN)
        return "unknown sender"
    thread = _thread(inbound, identity)
    waiting = text_of(redis_client.client.get(wait_key(inbound.connector, inbound.thread_key, identity.user_id)))
    approval = db.session.get(Approval, waiting) if waiting else None
    proven = approval is None or connector.answers(inbound, approval)
    if approval is not None and proven:
        outcome = _reply(connector, inbound, thread, approval, identity)
        if outcome is not None:
            return outcome
    return _converse(connector, inbound, thread, identity, supersede=proven)


def _identity(inbound: Inbound) -> ConnectorIdentity | None:
    """The person this connector's verified sender id is linked to (`flask connectors link`)."""
    return db.session.scalar(
        sa.select(ConnectorIdentity).where(
            ConnectorIdentity.connector == inbound.connector, ConnectorIdentity.external_id == inbound.sender
        )
    )


def _thread(inbound: Inbound, identity: ConnectorIdentity) -> ConnectorThread:
    """This person's conversation in this thread, started on their first message there."""
    thread = db.session.scalar(
        sa.select(ConnectorThread).where(
            ConnectorThread.connector == inbound.connector,
            ConnectorThread.thread_key == inbound.thread_key,
            ConnectorThread.user_id == identity.user_id,
        )
    )
    deleted = thread is not None and db.session.scalar(
        sa.select(Conversation.deleted_at.is_not(None)).where(Conversation.id == thread.conversation_id)
    )
    if thread is None or deleted:  # (the person deleted the thread's conversation: a new one from here)
        user = identity.user
        conversation = conversations.start(user, title=f"{inbound.connector}: {inbound.text.strip()[:40] or 'thread'}")
        if thread is not None:
            thread.conversation_id = conversation.id
            db.session.commit()
            return thread
        thread = ConnectorThread(
            connector=inbound.connector,
            thread_key=inbound.thread_key,
            user_id=user.id,
            conversation_id=conversation.id,
            address=inbound.address,
            subject=inbound.subject,
        )
        db.session.add(thread)
        db.session.commit()
    return thread


def _reply(
    connector: Connector, inbound: Inbound, thread: ConnectorThread, approval: Approval, identity: ConnectorIdentity
) -> str | None:
    """The person's proven reply to their waiting card: a file alone keeps the wait open; "yes"
    confirms through approvals, anything else declines, its words (quoted history left out) the
    reason the model reads."""
    if approval.user_id != identity.user_id:
        return None  # (a wait key names its person; this is only a second look)
    if not first_line(inbound.text):
        return "file only: still waiting" if inbound.has_files else None
    key = wait_key(inbound.connector, inbound.thread_key, identity.user_id)
    if not redis_client.client.delete(key):
        return None  # another delivery consumed it first
    decision = Decision.CONFIRM if first_line(inbound.text).lower() == "yes" else Decision.DECLINE
    binding = f"{inbound.connector}:{inbound.thread_key}"
    actor = Actor(user=identity.user, binding=binding, channel=inbound.connector)
    approval_id = approval.id
    try:
        reason = decline_reason(inbound.text) if decision == Decision.DECLINE else None
        proof = ChannelProof(f"{inbound.connector} verified sender")
        shown: Prompt | None = prompt_for(copilot.answer(approval_id, proof, actor, decision, reason=reason), actor)
    except CountersignError as error:
        try:
            shown = recover(approval_id, actor, error)  # decided elsewhere meanwhile, perhaps
        except CountersignError:
            shown = None  # gone
        if shown is not None and shown.status == Status.PENDING:
            dedupe.done(inbound)
            connector.send(thread, error.message)
            return "refused"
    except Exception:
        _rewait(key, approval_id)  # nothing was decided: the card still waits for its answer
        raise
    dedupe.done(inbound)
    # What the thread is told of its card (app/status.py has every line); the continuation is
    # posted when its turn ends.
    said, status = (shown.chat or "", shown.status) if shown is not None else (OUTCOMES[Status.EXPIRED].chat, Status.EXPIRED)
    connector.send(thread, said)
    return f"{decision}: {status}"


def _rewait(key: str, approval_id: str) -> None:
    """Put back a wait consumed by a reply whose answer then raised (the card is still pending)."""
    db.session.rollback()
    try:
        approval = db.session.get(Approval, approval_id)
        if approval is not None and approval.status == Status.PENDING:
            redis_client.client.set(key, approval_id, nx=True, ex=wait_ttl(approval))
    except Exception:  # the database or Redis is what failed: the web card still works
        log.warning("could not reopen the wait for %s", approval_id, exc_info=True)


def _converse(
    connector: Connector, inbound: Inbound, thread: ConnectorThread, identity: ConnectorIdentity, supersede: bool = True
) -> str:
    """A turn of the thread's conversation; its messages are posted when it ends (post_turn)."""
    if not inbound.text.strip():
        return "nothing to say"
    conversation = db.session.get(Conversation, thread.conversation_id)
    assert conversation is not None
    try:  # over the length limit: refused whole, and the thread is told the limit
        text = check_message(inbound.text, current_app.config["MESSAGE_MAX_CHARS"])
    except CountersignError as error:
        connector.send(thread, error.message)
        dedupe.done(inbound)
        return f"refused: {type(error).__name__}"
    actor = Actor(user=identity.user, binding=inbound.connector, channel=inbound.connector)
    _, run = copilot.send_message(conversation, actor, text, submit=False)
    if not supersede:
        _keep_wait(run.id)
    dedupe.done(inbound)
    copilot.submit(run.id)
    return "message"


def _keep_wait(run_id: int) -> None:
    """This turn came from a message that did not prove it answers the person's waiting card:
    its cards must not replace that wait (post_messages reads this)."""
    try:
        redis_client.client.set(keep_wait_key(run_id), "1", ex=KEEP_FOR)
    except RedisError:
        pass  # post_card then links the new card (its nx set fails closed)


def _unchecked(inbound: Inbound) -> str:
    """What the sender is told when Redis cannot be asked (nothing was done): a reply to a card
    still waiting in this thread is pointed to that card's page; anything else is to be sent again.
    Never another conversation's card (it was the person's newest anywhere: an agent's, from
    elsewhere, offered to a message that was no answer at all)."""
    identity = _identity(inbound)
    if identity is None:
        return SEND_AGAIN
    conversation_id = db.session.scalar(
        sa.select(ConnectorThread.conversation_id).where(
            ConnectorThread.connector == inbound.connector,
            ConnectorThread.thread_key == inbound.thread_key,
            ConnectorThread.user_id == identity.user_id,
        )
    )
    waiting = db.session.scalar(
        sa.select(Approval.id)
        .where(
            Approval.conversation_id == conversation_id,
            Approval.user_id == identity.user_id,
            Approval.status == Status.PENDING,
            Approval.expires_at > utcnow(),
        )
        .order_by(Approval.created_at.desc())
        .limit(1)
    )
    return RETRY.format(link=card_url(waiting)) if waiting is not None else SEND_AGAIN


def _send_raw(connector: Connector, inbound: Inbound, text: str) -> None:
    """Answer on a thread that may not have a conversation yet."""
    connector.send(
        ConnectorThread(
            connector=inbound.connector,
            thread_key=inbound.thread_key,
            address=inbound.address,
            subject=inbound.subject,
            user_id=0,
            conversation_id=0,
        ),
        text,
    )
