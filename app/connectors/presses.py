"""What a press of a card's button does (the buttons themselves: app.connectors.buttons): the
presser is mapped to a person and answers through the same approvals path as every answer
(copilot.answer with the channel's proof); anyone but the card's person is told no and decides
nothing (audited by the approvals); a second or redelivered press finds the card decided. The
message is then edited in place to the card's outcome and who decided it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import sqlalchemy as sa

from app import copilot
from app.connectors.buttons import Press, read, settled_text
from app.connectors.services import CONNECTORS
from app.copilot import audit
from app.copilot.approvals import Actor, ChannelProof, Prompt, prompt_for, recover
from app.errors import CountersignError
from app.extensions import db
from app.models import ConnectorIdentity

NOT_YOURS = "This card is not yours: nothing was decided."
UNKNOWN = "Countersign does not know this account: nothing was decided. Link it on your settings page."
FORGED = "This button is not one of Countersign's: nothing was decided."


def queue(press: Press) -> None:
    """The webhook's part: queue the press (the service wants its answer at once)."""
    copilot.call("app.connectors.presses:pressed", asdict(press))


def pressed(data: dict[str, Any]) -> str:
    """The job: answer the card a press names, as its presser, then show the outcome in place."""
    press = Press(**data)
    connector = CONNECTORS[press.connector]
    named = read(press)
    if named is None:
        audit.record_now(
            "connector.refused", "forged_button", tenant_id=None, user_id=None, detail=press.value[:80], channel=press.connector
        )
        connector.tell(press, FORGED)
        return "forged"
    approval_id, decision = named
    identity = db.session.scalar(
        sa.select(ConnectorIdentity).where(
            ConnectorIdentity.connector == press.connector, ConnectorIdentity.external_id == press.presser
        )
    )
    if identity is None:
        audit.record_now(
            "connector.refused",
            "unknown_presser",
            tenant_id=None,
            user_id=None,
            detail=f"from {press.presser}",
            channel=press.connector,
        )
        connector.tell(press, UNKNOWN)
        return "unknown presser"
    actor = Actor(user=identity.user, binding=f"{press.connector}:{press.chat}", channel=press.connector)
    try:
        answered = copilot.answer(approval_id, ChannelProof(f"{press.connector} verified press"), actor, decision)
    except CountersignError as error:  # (verify() and the claim audit every refusal)
        try:
            current: Prompt | None = recover(approval_id, actor, error)  # as it now stands
        except CountersignError:
            current = None  # gone, or not the presser's to see
        if current is None or not current.mine:
            connector.tell(press, NOT_YOURS)
            return "not theirs"
        if not current.final:
            connector.tell(press, error.message)
            return "refused"
        connector.edit(press, settled_text(current))
        return "decided already"
    db.session.refresh(answered)
    shown = prompt_for(answered, actor)
    connector.edit(press, settled_text(shown))
    return f"{decision}: {shown.status}"
