"""A card finds its person (issue 28 §3, §4): a card an agent asked for — over MCP, or with an agent
token on the API — reaches the person's chosen linked chat accounts (Telegram, Slack) with its own
sentence and rows (never the model's words), who asked, and the buttons that answer it there
(app.connectors.buttons). A person may choose, per linked account, which cards reach it
(`ConnectorIdentity.cards`: agents', all, none); by default their first linked chat account gets
agents' cards. A card asked in a chat thread is already in that thread: it is not sent again to the
same account. Forms and cards that need a countersignature get their Open link only."""

from __future__ import annotations

import sqlalchemy as sa

from app import copilot
from app.auth import credential_words, links
from app.connectors.base import one_line, rows_text
from app.connectors.buttons import answerable
from app.connectors.services import CONNECTORS
from app.copilot.approvals import Actor, Prompt, may_countersign, prompt_for
from app.extensions import db
from app.models import Approval, ConnectorIdentity, ConnectorThread, User
from app.status import CardsTo, Status


def cards_asked(approval_ids: list[str]) -> None:
    """The card listener (copilot.listen_cards): queue the sending of each card someone's linked
    account should get."""
    for approval_id in approval_ids:
        approval = db.session.get(Approval, approval_id)
        if approval is not None and targets(approval):
            copilot.call("app.connectors.push:push_card", approval_id)


def targets(approval: Approval) -> list[ConnectorIdentity]:
    """Where this card goes outside its own thread."""
    thread = db.session.scalar(sa.select(ConnectorThread).where(ConnectorThread.conversation_id == approval.conversation_id))
    chosen = []
    for identity, mode in links.modes(approval.user_id):
        if mode == CardsTo.OFF or (mode == CardsTo.AGENTS and not approval.requested_by_agent):
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
    sent = targets(approval)
    for identity in sent:
        text = prompt_text(_seen_by(approval, approval.user, identity), answerable(approval))
        CONNECTORS[identity.connector].post_prompt(identity.external_id, approval, text)
    return f"sent to {len(sent)}"


def _seen_by(approval: Approval, person: User, identity: ConnectorIdentity) -> Prompt:
    """The card as this person sees it on this linked account (approvals.prompt_for)."""
    viewer = Actor(user=person, binding=f"{identity.connector}:{identity.external_id}", channel=identity.connector)
    return prompt_for(approval, viewer)


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
    sent = 0
    for person in people:
        if not may_countersign(approval, person, registry):
            continue
        for identity, mode in links.modes(person.id):
            if mode != CardsTo.OFF:
                head = f"Your second signature is asked for ({approval.user.email} confirmed it)"
                text = prompt_text(_seen_by(approval, person, identity), answerable(approval), head)
                CONNECTORS[identity.connector].post_prompt(identity.external_id, approval, text)
                sent += 1
    return f"sent to {sent}"
