"""The one shape of a chat connector (verify, parse, send), the message it reads, and how a card is
put in a thread so that a reply may answer it (DESIGN §3.3)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Request, current_app, jsonify
from flask.typing import ResponseReturnValue
from redis.exceptions import RedisError

from app import copilot
from app.auth import credential_words, links
from app.copilot import conversations
from app.copilot.approvals import Actor, Prompt, card_url, prompt_for
from app.copilot.text import scrub
from app.extensions import core, db, redis_client
from app.markdown import to_plain
from app.models import Approval, ConnectorThread, Run, utcnow
from app.status import ApprovalType, Role, Status

log = logging.getLogger(__name__)
LINK = "Please answer this in Countersign: {url}"
WINDOW = 300  # seconds a signed webhook timestamp is good for (Slack's, and the email provider's)
KEEP_FOR = 86400  # how long a turn's "keep the open wait" mark lasts


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
    sender_name: str = ""  # the sender's name as the service gives it (shown when they link their account)
    at: str = ""  # where the message stands in its chat, as the service numbers them (Slack's ts, Telegram's message_id)
    replies_to: str = ""  # the message it answers with the service's Reply, where the service says (Telegram)

    def __post_init__(self) -> None:
        # NUL and lone surrogates cannot be stored: drop / replace them in whatever a chat service sends.
        texts = (
            *("thread_key", "sender", "text", "event_id", "address", "subject", "refs", "unproven", "claim"),
            *("at", "replies_to", "sender_name"),
        )
        for name in texts:
            setattr(self, name, scrub(str(getattr(self, name))))


class Unverified(Exception):
    """A webhook the chat service cannot be shown to have sent: refused with `status`, before its
    body is read; `why` goes to the log only (the caller learns nothing but the status)."""

    def __init__(self, why: str, status: int = 401) -> None:
        super().__init__(why)
        self.why = why
        self.status = status


class Connector(ABC):
    """A chat service. The webhook view (app.connectors.webhook) calls `verify()`, then
    `handshake()` and `parse()` on the body's JSON object, then answers with `acknowledge()`;
    the conversation flow (app.connectors.receive) posts with `send()` and `send_card()`."""

    name = ""  # in wait keys, ConnectorIdentity and ConnectorThread rows, and the audit log's channel
    # A card's message carries buttons that answer it (app.connectors.buttons): several cards may
    # then wait in one thread, each answered by its own; "yes" answers the newest.
    has_buttons = False
    # The service numbers a chat's messages in the order it took them (written_after): a reply
    # answers a card only when it came after the card's own message.
    numbers_messages = False
    path = ""  # the webhook's URL under /connectors

    @abstractmethod
    def verify(self, request: Request) -> None:
        """Prove the service sent this webhook (headers, and the raw body where it is signed);
        raise Unverified otherwise. Nothing else of the request is read before this."""

    @abstractmethod
    def parse(self, payload: dict[str, Any]) -> Inbound | None:
        """The person's new message in a verified webhook's JSON object; None for anything that
        is not one (a bot's, an edit, another kind of event), acknowledged and dropped."""

    @abstractmethod
    def send(self, thread: ConnectorThread, text: str) -> None:
        """Post plain text into the thread: nothing in it may act as the service's markup."""

    def send_reply(self, thread: ConnectorThread, markdown: str) -> None:
        """Post the model's words, written in Markdown: as plain text here (every link's URL in
        full, images as links never fetched); a service with its own markup writes that, escaped.
        Markdown that shows nothing (a link to nowhere, a lone definition) goes as it was written,
        its hidden characters shown (send does that): a platform refuses an empty message."""
        self.send(thread, to_plain(markdown).strip() or markdown)

    def handshake(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON answer to a webhook that only checks the URL (Slack's url_verification)."""
        return None

    def acknowledge(self) -> ResponseReturnValue:
        """What the webhook answers once the message is accepted: the service must not retry."""
        return jsonify(ok=True)

    def send_card(self, thread: ConnectorThread, approval: Approval, text: str) -> tuple[str, str] | None:
        """Post a card that a reply may answer (email marks it with the card's own Message-ID);
        where its message has buttons, (chat, message id), so that it can show its outcome later."""
        self.send(thread, text)
        return None

    def link_code(self, inbound: Inbound) -> str | None:
        """The one-time code this message carries to link the sender's account to a person (a
        message that is nothing but one: app.auth.links). Email links by a mailed link instead."""
        return links.code_in(inbound.text)

    def post_prompt(self, chat: str, approval: Approval, text: str) -> tuple[str, str]:
        """Send a card to a person's own chat with this service (`chat`: their linked account's id),
        with the buttons that answer it (app.connectors.buttons): (the chat's id, the message's id).
        Only the chat services do."""
        raise NotImplementedError(f"{self.name} takes no cards outside a thread")

    def say_to(self, chat: str, text: str) -> None:
        """Write to a person's own chat with this service (`chat`: their linked account's id)."""
        raise NotImplementedError(f"{self.name} has no chat of its own")

    def press(self, payload: dict[str, Any]) -> Any:
        """A press of a card's button in a verified webhook's JSON object (Telegram's callback
        query), or None: the services whose presses come on a webhook of their own say None."""
        return None

    def edit(self, press: Any, text: str) -> None:
        """Show a pressed card's message (a Press, or any object with its `chat` and `message`) as
        `text` (its outcome), without its buttons."""
        raise NotImplementedError(f"{self.name} has no buttons")

    def tell(self, press: Any, text: str) -> None:
        """Tell the presser alone (nobody else in the chat sees it)."""
        raise NotImplementedError(f"{self.name} has no buttons")

    def answers(self, inbound: Inbound, approval: Approval) -> bool:
        """Whether this message proves it answers this card. Slack and Telegram verify the sender
        themselves; the service must also have numbered the message after the card's own in its
        chat (`written_after`): a "yes" it took before the card (a second "yes" to the card before
        it, say) never answers a card its sender had not seen. A message sent with Reply on
        another message (Telegram says which) is about that one, not this card. Email must show
        more (email.Email.answers)."""
        chat = inbound.thread_key.partition(":")[0]
        posts = [p.get("message", "") for p in approval.posted or () if p.get("connector") == self.name and p.get("chat") == chat]
        if inbound.replies_to and inbound.replies_to not in posts:
            return False
        return any(self.written_after(inbound.at, posted) for posted in posts)

    def written_after(self, at: str, posted: str) -> bool:
        """Whether the message at `at` in a chat was written after the one at `posted` (this
        connector's numbering of a chat's messages). A service that numbers none proves nothing."""
        return False

    @property
    def confirms_by_reply(self) -> bool:
        return self.name in current_app.config["CONNECTORS_CONFIRM_BY_REPLY"]


def text_of(value: Any) -> str:
    """A Redis reply as text ("" for none)."""
    return value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else ""


def within_window(stamp: str, now: float | None = None) -> bool:
    """A signed webhook's timestamp: ASCII digits (int() takes "²" and "٣" too), within WINDOW."""
    return stamp.isascii() and stamp.isdigit() and len(stamp) <= 12 and abs((now or time.time()) - int(stamp)) <= WINDOW


def check_signature(secret: str, stamp: str, given: str, signed: bytes, scheme: str) -> None:
    """A timestamped HMAC-SHA256 webhook signature (`<scheme>=<hex>` over `signed`), the stamp within
    WINDOW, compared in constant time; Unverified (401) otherwise."""
    if not secret or not stamp:
        raise Unverified("missing signature or timestamp")
    if not within_window(stamp):
        raise Unverified("stale or malformed timestamp")
    expected = f"{scheme}=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise Unverified("bad signature")


def wait_key(connector: str, thread_key: str, user_id: int) -> str:
    """A wait belongs to one person in one thread: nobody else's message can find it."""
    return f"awaiting_confirm:{connector}:{thread_key}:{user_id}"


def keep_wait_key(run_id: int) -> str:
    """Marks a turn whose cards may not replace the person's open wait (receive sets, post_messages reads)."""
    return f"keep-wait:{run_id}"


def wait_ttl(approval: Approval) -> int:
    """A wait lasts CONNECTOR_CONFIRM_TTL, never beyond the card's own life."""
    remaining = int((approval.expires_at - utcnow()).total_seconds())
    return max(1, min(remaining, int(current_app.config["CONNECTOR_CONFIRM_TTL"])))


def post_messages(connector: Connector, thread: ConnectorThread, message_ids: list[int]) -> None:
    """Post a turn's messages into the thread: text as text, cards as cards (or links). The words
    of a turn an agent's credential started say who asked first, as its cards do: the person's thread
    is hers, and what an agent made the model say there must not pass for an answer to her."""
    messages = conversations.messages(thread.conversation_id, message_ids)
    run_ids = {m.run_id for m in messages if m.run_id is not None}
    try:
        keep = any(redis_client.client.exists(keep_wait_key(r)) for r in run_ids)
    except RedisError:
        keep = True
    agents = {r.id: r for r in db.session.scalars(sa.select(Run).where(Run.id.in_(run_ids), Run.agent.is_(True)))}
    for message in messages:
        if message.approval is not None:
            post_card(connector, thread, message.approval, supersede=not keep)
            continue
        run = agents.get(message.run_id or 0)
        said = f"{credential_words('Asked', run.via, agent=True)}:\n{message.text}" if run else message.text
        if message.text and message.role == Role.ASSISTANT:
            connector.send_reply(thread, said)
        elif message.text:
            connector.send(thread, said)


def card_text(prompt: Prompt) -> str:
    """The card as one chat message. A chat message has no table, so a value's own line breaks
    could pass for rows of their own ("To: boss@…"): the sentence is kept on one line, and every
    further line of a value is marked as belonging to the row above."""
    return f"⚠️ {one_line(prompt.text)} Reply 'Yes' to confirm.{rows_text(prompt)}"


def agent_card_text(prompt: Prompt, link: str) -> str:
    """An agent's card in the thread: who asked first, what it would do, and the link: a reply here
    answers only the cards the person's own requests made, so this one is answered on the web."""
    card = f"\n⚠️ {one_line(prompt.text)}{rows_text(prompt)}" if prompt.type == ApprovalType.CONFIRM else ""
    asked = credential_words("Asked", prompt.requested_via, prompt.requested_by_agent)
    return f"{asked}: a reply here cannot answer it.{card}\n{link}"


def one_line(reason: str) -> str:
    return " ⏎ ".join(line for line in reason.splitlines() if line.strip())


def rows_text(prompt: Prompt) -> str:
    return "".join(f"\n{row.label}: " + "\n    │ ".join(row.value.splitlines() or [""]) for row in prompt.rows)


def thread_prompt(connector: Connector, thread: ConnectorThread, approval: Approval) -> Prompt:
    """The card as the thread's person sees it here (approvals.prompt_for): whether a reply may
    answer it is the engine's rule, not the connector's."""
    viewer = Actor(user=approval.user, binding=f"{connector.name}:{thread.thread_key}", channel=connector.name)
    return prompt_for(approval, viewer)


def keep_posts(approval: Approval, posts: list[dict[str, str]]) -> None:
    """Keep where the card went with its buttons (in its thread, or to a linked chat), so that its
    outcome is shown there once it is decided (app.connectors.push.settle_posts), and a reply
    there can be shown to come after it (Connector.answers); decided before the posts were kept,
    it is shown now."""
    if not posts:
        return
    add_posts(approval.id, posts)
    db.session.refresh(approval)
    if approval.status not in (Status.PENDING, Status.COUNTERSIGNING):
        copilot.call("app.connectors.push:settle_posts", approval.id)


_HOLD_CARD = sa.update(Approval).where(Approval.id == sa.bindparam("approval_id")).values(posted=Approval.posted)
_POSTED = sa.select(Approval.posted).where(Approval.id == sa.bindparam("approval_id"))
_SET_POSTED = sa.update(Approval).where(Approval.id == sa.bindparam("approval_id")).values(posted=sa.bindparam("now_posted"))


def add_posts(approval_id: str, posts: list[dict[str, str]]) -> None:
    """Add `posts` to where the card went, and commit: with none, only mark it looked at (`[]`
    where it was NULL). Two jobs that sent one card at once (its thread's post, a push to a linked
    chat) each keep theirs: the card's row is held (an UPDATE that changes nothing) before what it
    holds is read, so the second waits for the first's commit and reads it."""
    core(_HOLD_CARD, {"approval_id": approval_id})
    kept = core(_POSTED, {"approval_id": approval_id}).scalar() or []
    core(_SET_POSTED, {"approval_id": approval_id, "now_posted": [*kept, *posts]})
    db.session.commit()


def post_card(connector: Connector, thread: ConnectorThread, approval: Approval, supersede: bool = True) -> None:
    """Ask in the thread, or, where this connector may not take "yes" (or it is a form, or a card
    that needs a countersignature: neither signature is given in a chat), link to the card in the
    web app: nothing risky runs unasked (fail closed). The card is posted before its wait opens,
    so nothing unseen can be confirmed. Without `supersede` (a message that did not prove it
    answers the person's waiting card), an open wait stays and the new card gets a link. A card an
    agent's credential asked for never opens a wait, so it never replaces the person's: the "yes"
    in her thread answers only what she asked for herself (DESIGN §6.8). A newer card takes the
    "yes" of a thread; where cards have buttons the older one still waits (its buttons answer it),
    elsewhere it ends superseded."""
    link = LINK.format(url=card_url(approval.id))
    shown = thread_prompt(connector, thread, approval)
    if shown.requested_by_agent:
        connector.send(thread, agent_card_text(shown, link))
        return
    if not shown.reply or not connector.confirms_by_reply:  # (a form, a card needing two signatures: on the web)
        connector.send(thread, link)
        return
    redis = redis_client.client
    key = wait_key(connector.name, thread.thread_key, thread.user_id)
    if not supersede and text_of(redis.get(key)) not in ("", approval.id):
        connector.send(thread, link)
        return
    try:
        posted = connector.send_card(thread, approval, card_text(shown))
    except Exception:  # refused (Slack's "ok": false), too long, unreachable: nobody saw it
        log.warning(
            "%s could not post card %s: its link goes instead, and no wait opens", connector.name, approval.id, exc_info=True
        )
        connector.send(thread, link)
        return
    if connector.numbers_messages and (posted is None or not posted[1]):
        # Taken, but not said which message it is: no reply can be shown to come after it.
        connector.send(thread, link)  # (its buttons still answer it)
        return
    if posted is not None:  # its buttons go when it is decided, wherever
        chat, message = posted
        keep_posts(approval, [{"connector": connector.name, "chat": chat, "message": message}])
    if not supersede:
        if not redis.set(key, approval.id, ex=wait_ttl(approval), nx=True):
            connector.send(thread, link)  # a wait opened meanwhile: this card is answered on the web
        return
    previous = text_of(redis.set(key, approval.id, ex=wait_ttl(approval), get=True))
    if previous and previous != approval.id and not connector.has_buttons:
        copilot.supersede(previous, connector.name)  # (with buttons, the older card still waits for its own)
