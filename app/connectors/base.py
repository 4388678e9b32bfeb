"""The connector contract and the one conversation flow every connector shares: map the sender,
intercept a reply to a waiting card (DESIGN §3.3), or run the agent and post what it says."""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import current_app
from redis.exceptions import RedisError

from app.copilot import agent, audit, jobs
from app.copilot.cards import card_url
from app.copilot.text import check_message, scrub
from app.copilot.tokens import Actor, ChannelProof
from app.errors import CountersignError
from app.extensions import db, redis_client
from app.models import Approval, ConnectorIdentity, ConnectorThread, Conversation, Message, utcnow
from app.status import OUTCOMES, Status, chat_line

log = logging.getLogger(__name__)

RETRY = "I couldn't check your confirmation — try again in a moment, or use the link: {link}"
UNKNOWN = "Sorry, I don't know who you are here. Ask an admin to link your account to Countersign."
LINK = "Please answer this in Countersign: {url}"
WINDOW = 300  # seconds a signed webhook timestamp is good for (Slack's, and the email provider's)
# A delivery is held for six minutes while its job is queued or running (the job stores the message
# and queues the turn, which runs as a job of its own, so it is short). A delivery job that raises
# lets go at once, so a redelivery is processed; one that ends marks it done for a day, so a
# redelivery acts once.
LEASE = 360
DONE_FOR = 86400
DONE = "done"


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
    refs: str = ""  # the Message-IDs an email answers (In-Reply-To, References)
    unproven: str = ""  # why the channel could not prove the sender ("" when it did): email's verdict
    claim: str = ""  # this delivery's hold on its dedupe key, taken by the webhook

    def __post_init__(self) -> None:
        # NUL and lone surrogates cannot be stored: drop / replace them in whatever a chat service sends.
        for name in ("thread_key", "sender", "text", "event_id", "address", "subject", "refs", "unproven", "claim"):
            setattr(self, name, scrub(str(getattr(self, name))))


class Connector:
    """A chat service: `send()` posts into a thread. Verification and parsing live in each
    connector's webhook view."""

    name = ""

    def send(self, thread: ConnectorThread, text: str) -> None:
        raise NotImplementedError

    def send_card(self, thread: ConnectorThread, approval: Approval, text: str) -> None:
        """Post a card that a reply may answer (email marks it with the card's own Message-ID)."""
        self.send(thread, text)

    def answers(self, inbound: Inbound, approval: Approval) -> bool:
        """Whether this message proves it answers this card. Slack and Telegram verify the sender
        themselves, and that is the proof; email must show more (email.Email.answers)."""
        return True

    @property
    def confirms_by_reply(self) -> bool:
        return self.name in current_app.config["CONNECTORS_CONFIRM_BY_REPLY"]


def _text(value: Any) -> str:
    """A Redis reply as text ("" for none)."""
    return value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else ""


def wait_key(connector: str, thread_key: str, user_id: int) -> str:
    """A wait belongs to one person in one thread: nobody else's message can find it."""
    return f"awaiting_confirm:{connector}:{thread_key}:{user_id}"


def seen_key(inbound: Inbound) -> str:
    return f"seen:{inbound.connector}:{inbound.event_id}"


def within_window(stamp: str, now: float | None = None) -> bool:
    """A signed webhook's timestamp: ASCII digits (int() takes "²" and "٣" too), within WINDOW."""
    return stamp.isascii() and stamp.isdigit() and len(stamp) <= 12 and abs((now or time.time()) - int(stamp)) <= WINDOW


def claim(inbound: Inbound) -> bool:
    """At the webhook: hold this delivery while its turn is queued (LEASE). False when it is held
    already or done: a redelivery, acknowledged and not queued again."""
    token = secrets.token_hex(8)
    if not redis_client.client.set(seen_key(inbound), token, nx=True, ex=LEASE):
        return False
    inbound.claim = token
    return True


def _hold(inbound: Inbound) -> bool:
    """In the job: whether this delivery is still ours (renewed for the run), or free again after
    its lease ran out (taken). Another holder, or done: a duplicate."""
    redis = redis_client.client
    key = seen_key(inbound)
    if inbound.claim and _text(redis.get(key)) == inbound.claim:
        return bool(redis.set(key, inbound.claim, xx=True, ex=LEASE))
    inbound.claim = secrets.token_hex(8)
    return bool(redis.set(key, inbound.claim, nx=True, ex=LEASE))


def _done(inbound: Inbound) -> None:
    """The turn's work is committed: a redelivery from now on acts once (is dropped)."""
    redis_client.client.set(seen_key(inbound), DONE, ex=DONE_FOR)


def release(inbound: Inbound) -> None:
    """The turn raised before its work was committed: let a redelivery process it."""
    try:
        redis = redis_client.client
        if _text(redis.get(seen_key(inbound))) == inbound.claim:
            redis.delete(seen_key(inbound))
    except RedisError:
        pass  # the lease runs out on its own


def first_line(text: str) -> str:
    """The first non-empty line that is not quoted history."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(">"):
            return stripped
    return ""


def receive(connector: Connector, inbound: Inbound) -> str:
    """Handle one inbound message once; returns what happened (for logs and tests)."""
    if inbound.unproven:
        return _refuse_sender(inbound)
    try:
        if not _hold(inbound):
            return "duplicate"
        outcome = _receive(connector, inbound)
    except RedisError as error:
        log.warning("redis unavailable for %s: %s", inbound.connector, error)
        db.session.rollback()
        _send_raw(connector, inbound, RETRY.format(link=_latest_link(inbound)))
        return "redis down"
    except Exception:
        release(inbound)
        raise
    _done(inbound)
    return outcome


def _refuse_sender(inbound: Inbound) -> str:
    """A message whose sender the channel could not prove is from nobody: no turn, no answer to a
    card, and no reply (a forged From would turn it into mail to someone who never wrote). Kept in
    the audit log of the person it named, without its words."""
    try:
        if not _hold(inbound):
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
        _done(inbound)  # a redelivery is not recorded again
    except RedisError:
        pass  # the webhook's hold runs out on its own
    return "refused: unproven sender"


def _receive(connector: Connector, inbound: Inbound) -> str:
    """The sender's own wait, if this message proves it answers it; otherwise a conversation turn,
    which may not replace a wait it did not prove it may answer."""
    identity = _identity(inbound)
    if identity is None:
        _send_raw(connector, inbound, UNKNOWN)
        return "unknown sender"
    thread = _thread(inbound, identity)
    waiting = _text(redis_client.client.get(wait_key(inbound.connector, inbound.thread_key, identity.user_id)))
    approval = db.session.get(Approval, waiting) if waiting else None
    proven = approval is None or connector.answers(inbound, approval)
    if approval is not None and proven:
        outcome = _reply(connector, inbound, thread, approval, identity)
        if outcome is not None:
            return outcome
    return _converse(connector, inbound, thread, identity, supersede=proven)


def _identity(inbound: Inbound) -> ConnectorIdentity | None:
    return db.session.scalar(
        sa.select(ConnectorIdentity).where(
            ConnectorIdentity.connector == inbound.connector, ConnectorIdentity.external_id == inbound.sender
        )
    )


def _thread(inbound: Inbound, identity: ConnectorIdentity) -> ConnectorThread:
    thread = db.session.scalar(
        sa.select(ConnectorThread).where(
            ConnectorThread.connector == inbound.connector,
            ConnectorThread.thread_key == inbound.thread_key,
            ConnectorThread.user_id == identity.user_id,
        )
    )
    if thread is None:
        user = identity.user
        conversation = Conversation(
            tenant_id=user.tenant_id, user_id=user.id, title=f"{inbound.connector}: {inbound.text.strip()[:40] or 'thread'}"
        )
        db.session.add(conversation)
        db.session.flush()
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
    confirms through approvals, anything else declines."""
    if approval.user_id != identity.user_id:
        return None  # (a wait key names its person; this is only a second look)
    if not first_line(inbound.text):
        return "file only: still waiting" if inbound.has_files else None
    key = wait_key(inbound.connector, inbound.thread_key, identity.user_id)
    if not redis_client.client.delete(key):
        return None  # another delivery consumed it first
    decision = "confirm" if first_line(inbound.text).lower() == "yes" else "decline"
    binding = f"{inbound.connector}:{inbound.thread_key}"
    actor = Actor(user=identity.user, binding=binding, channel=inbound.connector)
    approval_id = approval.id
    try:
        status = agent.answer(approval_id, ChannelProof(f"{inbound.connector} sender check"), actor, decision).status
    except CountersignError as error:
        db.session.rollback()
        current = db.session.get(Approval, approval_id)
        status = current.status if current else Status.EXPIRED
        if status == Status.PENDING:
            _done(inbound)
            connector.send(thread, error.message)
            return "refused"
    except Exception:
        _rewait(key, approval_id)  # nothing was decided: the card still waits for its answer
        raise
    _done(inbound)
    connector.send(thread, _outcome(status, approval_id))  # the continuation is posted when its turn ends
    return f"{decision}: {status}"


def _rewait(key: str, approval_id: str) -> None:
    """Put back a wait consumed by a reply whose answer then raised (the card is still pending)."""
    db.session.rollback()
    try:
        approval = db.session.get(Approval, approval_id)
        if approval is not None and approval.status == Status.PENDING:
            redis_client.client.set(key, approval_id, nx=True, ex=_wait_ttl(approval))
    except Exception:  # the database or Redis is what failed: the web card still works
        log.warning("could not reopen the wait for %s", approval_id, exc_info=True)


def _outcome(status: str, approval_id: str) -> str:
    """What the thread is told once its card is decided (app/status.py has every line)."""
    approval = db.session.get(Approval, approval_id)
    return chat_line(approval) if approval is not None else OUTCOMES[Status(status)].chat


def _converse(
    connector: Connector, inbound: Inbound, thread: ConnectorThread, identity: ConnectorIdentity, supersede: bool = True
) -> str:
    if not inbound.text.strip():
        return "nothing to say"
    conversation = db.session.get(Conversation, thread.conversation_id)
    assert conversation is not None
    try:  # over the length limit: refused whole, and the thread is told the limit
        text = check_message(inbound.text, current_app.config["MESSAGE_MAX_CHARS"])
    except CountersignError as error:
        connector.send(thread, error.message)
        _done(inbound)
        return f"refused: {type(error).__name__}"
    actor = Actor(user=identity.user, binding=inbound.connector, channel=inbound.connector)
    _, run = agent.send_message(conversation, actor, text, submit=False)
    if not supersede:
        _keep_wait(run.id)
    _done(inbound)
    jobs.submit(run.id)
    return "message"


def _keep_wait(run_id: int) -> None:
    """This turn came from a message that did not prove it answers the person's waiting card:
    its cards must not replace that wait (post_messages reads this)."""
    try:
        redis_client.client.set(f"keep-wait:{run_id}", "1", ex=DONE_FOR)
    except RedisError:
        pass  # post_card then links the new card (its nx set fails closed)


def post_messages(connector: Connector, thread: ConnectorThread, message_ids: list[int]) -> None:
    """Post a turn's messages into the thread: text as text, cards as cards (or links)."""
    messages = list(db.session.scalars(sa.select(Message).where(Message.id.in_(message_ids)).order_by(Message.id)))
    run_ids = {m.run_id for m in messages if m.run_id is not None}
    try:
        keep = any(redis_client.client.exists(f"keep-wait:{r}") for r in run_ids)
    except RedisError:
        keep = True
    _post(connector, thread, messages, supersede=not keep)


def _post(connector: Connector, thread: ConnectorThread, messages: list[Message], supersede: bool = True) -> None:
    for message in messages:
        if message.approval is not None:
            post_card(connector, thread, message.approval, supersede)
        elif message.text:
            connector.send(thread, message.text)


def _wait_ttl(approval: Approval) -> int:
    """A wait lasts CONNECTOR_CONFIRM_TTL, never beyond the card's own life."""
    remaining = int((approval.expires_at - utcnow()).total_seconds())
    return max(1, min(remaining, int(current_app.config["CONNECTOR_CONFIRM_TTL"])))


def card_text(approval: Approval) -> str:
    """The card as one chat message. A chat message has no table, so a value's own line breaks
    could pass for rows of their own ("To: boss@…"): the sentence is kept on one line, and every
    further line of a value is marked as belonging to the row above."""
    reason = " ⏎ ".join(line for line in approval.reason.splitlines() if line.strip())
    rows = "".join(f"\n{row['label']}: " + "\n    │ ".join(row["value"].splitlines() or [""]) for row in approval.rows)
    return f"⚠️ {reason} Reply 'Yes' to confirm.{rows}"


def post_card(connector: Connector, thread: ConnectorThread, approval: Approval, supersede: bool = True) -> None:
    """Ask in the thread, or, where this connector may not take "yes" (or it is a form), link
    to the card in the web app: nothing risky runs unasked (fail closed). The card is posted
    before its wait opens, so nothing unseen can be confirmed. Without `supersede` (a message
    that did not prove it answers the person's waiting card), an open wait stays and the new
    card gets a link."""
    link = LINK.format(url=card_url(approval.id))
    if approval.type != "confirm" or not connector.confirms_by_reply:
        connector.send(thread, link)
        return
    redis = redis_client.client
    key = wait_key(connector.name, thread.thread_key, thread.user_id)
    if not supersede and _text(redis.get(key)) not in ("", approval.id):
        connector.send(thread, link)
        return
    connector.send_card(thread, approval, card_text(approval))
    if not supersede:
        if not redis.set(key, approval.id, ex=_wait_ttl(approval), nx=True):
            connector.send(thread, link)  # a wait opened meanwhile: this card is answered on the web
        return
    previous = _text(redis.set(key, approval.id, ex=_wait_ttl(approval), get=True))
    if previous and previous != approval.id:
        agent.supersede(previous, connector.name)


def _latest_link(inbound: Inbound) -> str:
    """A link to the sender's newest pending card, for when Redis cannot be asked."""
    identity = _identity(inbound)
    if identity is None:
        return card_url("")
    approval = db.session.scalar(
        sa.select(Approval)
        .where(Approval.user_id == identity.user_id, Approval.status == Status.PENDING)
        .order_by(Approval.created_at.desc())
    )
    return card_url(approval.id) if approval else current_app.config["PUBLIC_URL"]


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
