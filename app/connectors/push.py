"""A card finds its person (issue 28 §3, §4): a card an agent asked for — over MCP, or with an agent
token on the API — reaches the person's chosen linked chat accounts (Telegram, Slack) with its own
sentence and rows (never the model's words), who asked, and the buttons that answer it there
(app.connectors.buttons). A person may choose, per linked account, which cards reach it
(`ConnectorIdentity.cards`: agents', all, none); by default their first linked chat account gets
agents' cards. A card asked in a chat thread is already in that thread: it is not sent again to the
same account. Forms and cards that need a countersignature get their Open link only."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from app import copilot
from app.auth import credential_words, links
from app.connectors.base import add_posts, keep_posts, one_line, rows_text
from app.connectors.buttons import answerable, settled_text
from app.connectors.services import CONNECTORS
from app.copilot.approvals import Actor, Prompt, may_countersign, prompt_for
from app.extensions import db
from app.models import Approval, ConnectorIdentity, ConnectorThread, User, utcnow
from app.sse import watching
from app.status import CardsTo, Status

log = logging.getLogger(__name__)


def cards_asked(approval_ids: list[str]) -> None:
    """The card listener (copilot.listen_cards): queue the sending of each card someone's linked
    account should get."""
    for approval_id in approval_ids:
        approval = db.session.get(Approval, approval_id)
        if approval is not None and targets(approval):
            copilot.call("app.connectors.push:push_card", approval_id)


def targets(approval: Approval, unseen: bool = False) -> list[ConnectorIdentity]:
    """Where this card goes outside its own thread: as it is asked, by each account's choice; once
    it has waited unseen (push_unseen), to every account that takes cards."""
    thread = db.session.scalar(sa.select(ConnectorThread).where(ConnectorThread.conversation_id == approval.conversation_id))
    chosen = []
    for identity, mode in links.modes(approval.user_id):
        if mode == CardsTo.OFF or (mode == CardsTo.AGENTS and not approval.requested_by_agent and not unseen):
            continue
        if thread is not None and thread.connector == identity.connector and thread.user_id == identity.user_id:
            continue  # (asked in this service's thread: it is there already)
        chosen.append(identity)
    return chosen


def push_card(approval_id: str) -> str:
    """The job: send a card still waiting to each of its person's chosen accounts."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.status != Status.PENDING:
        return "decided"
    posted = _send(approval, targets(approval))
    keep_posts(approval, posted)
    return f"sent to {len(posted)}"


def _send(
    approval: Approval, identities: list[ConnectorIdentity], head: str = "", person: User | None = None
) -> list[dict[str, str]]:
    """Post the card, as `person` (its own, by default) sees it, to each account: where it went."""
    posted = []
    for identity in identities:
        text = prompt_text(
            _seen_by(approval, person or approval.user, identity.connector, identity.external_id), answerable(approval), head
        )
        try:
            chat, message = CONNECTORS[identity.connector].post_prompt(identity.external_id, approval, text)
        except Exception:  # refused (Slack's "ok": false), unreachable: the other accounts still get it
            log.warning("could not send card %s to a linked %s account", approval.id, identity.connector, exc_info=True)
            continue
        posted.append({"connector": identity.connector, "chat": chat, "message": message})
    return posted


def _seen_by(approval: Approval, person: User, connector: str, chat: str) -> Prompt:
    """The card as this person sees it in that chat (approvals.prompt_for)."""
    return prompt_for(approval, Actor(user=person, binding=f"{connector}:{chat}", channel=connector))


def push_unseen(after_seconds: int) -> int:
    """Cards waiting longer than `after_seconds` whose person has no live view open (no page, no
    client following events) and that went nowhere yet: sent to the person's linked chat accounts
    that take cards (`flask connectors push-unseen`, from cron). Each card is sent at most once;
    one whose person is watching is looked at again next time. The number of cards sent."""
    cutoff = utcnow() - timedelta(seconds=after_seconds)
    waiting = db.session.scalars(
        sa.select(Approval)
        .where(Approval.status == Status.PENDING, Approval.posted.is_(None), Approval.created_at <= cutoff)
        .order_by(Approval.created_at)
    ).all()
    sent = 0
    for approval in waiting:
        if watching(approval.user_id):
            continue
        posted = _send(approval, targets(approval, unseen=True))
        if posted:
            keep_posts(approval, posted)  # (decided meanwhile: its outcome shown there now)
        else:
            add_posts(approval.id, [])  # looked at, and nothing takes it
        sent += bool(posted)
    return sent


def card_decided(approval_id: str) -> None:
    """The decided listener (copilot.listen_decided): queue showing the outcome where it was sent."""
    copilot.call("app.connectors.push:settle_posts", approval_id)


def settle_posts(approval_id: str) -> int:
    """The job: each message with buttons the card was sent as (in its thread, or to a linked
    chat) now reads its outcome, its buttons gone (one that cannot be edited any more — deleted,
    too old — is left as it is)."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or not approval.posted:
        return 0
    done = 0
    for post in approval.posted:
        try:
            shown = _seen_by(approval, approval.user, post["connector"], post["chat"])
            CONNECTORS[post["connector"]].edit(Posted(post["chat"], post["message"]), settled_text(shown))
            done += 1
        except Exception:
            log.info("could not show the outcome of %s in %s", approval_id, post["connector"], exc_info=True)
    return done


@dataclass
class Posted:
    """A card's message in a person's chat, as `Connector.edit` reads it."""

    chat: str
    message: str


def prompt_text(prompt: Prompt, by_button: bool, head: str = "") -> str:
    """The card as a message of its own: who asked, the action's sentence and rows."""
    card = f"⚠️ {one_line(prompt.text)}{rows_text(prompt)}"
    how = "" if by_button else "\nAnswer it in Countersign (Open)."
    return f"{head or credential_words('Asked', prompt.requested_via, prompt.requested_by_agent)}:\n{card}{how}"


def countersign_asked(approval_id: str) -> None:
    """The countersign listener (copilot.listen_countersign): queue the sending of its link to the
    people who may give the second signature, on their linked chat accounts."""
    copilot.call("app.connectors.push:push_countersign", approval_id)


def push_countersign(approval_id: str) -> str:
    """The job: a card waiting for its second signature, with its Open link (it is signed on the
    web), to each countersigner's linked chat accounts that take cards."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.status != Status.COUNTERSIGNING:
        return "decided"
    registry = copilot.engine().registry
    people = db.session.scalars(sa.select(User).where(User.tenant_id == approval.tenant_id, User.id != approval.user_id))
    sent: list[dict[str, str]] = []
    for person in people:
        if not may_countersign(approval, person, registry):
            continue
        for identity, mode in links.modes(person.id):
            if mode != CardsTo.OFF:
                head = f"Your second signature is asked for ({approval.user.email} confirmed it)"
                sent += _send(approval, [identity], head, person)
    keep_posts(approval, sent)
    return f"sent to {len(sent)}"


def account_linked(identity_id: int) -> None:
    """The linked listener (app.auth.links): queue telling the account whose it now is."""
    copilot.call("app.connectors.push:tell_linked", identity_id)


def tell_linked(identity_id: int) -> None:
    """The job: the account just linked is told to whom (someone may have been sent another's code)."""
    identity = db.session.get(ConnectorIdentity, identity_id)
    if identity is not None:
        text = links.LINKED.format(service=identity.connector.title(), email=identity.user.email)
        CONNECTORS[identity.connector].say_to(identity.external_id, text)
