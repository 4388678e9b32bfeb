"""Buttons that name their card (issue 28 §2): Confirm, Decline and Open on a card posted to Slack
(Block Kit) or Telegram (an inline keyboard); what a press does is app.connectors.presses.

A button's value names its card, its answer and the chat it was posted in, signed with the app's
key: a press is an answer to that card, from that chat, and no other (a client that sends a value
of its own, or copies one into another chat, decides nothing). The press arrives on a verified
webhook (Slack's signing secret over the interaction payload, in its five-minute window;
Telegram's secret token), its presser is mapped to a person and goes through the same approvals
path as every answer (copilot.answer with the channel's proof): anyone but the card's person is
told no and decides nothing (audited); a second press, or a redelivered one, finds the card decided.
The message is then edited in place to the card's outcome and who decided it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from flask import current_app

from app.copilot.approvals import Prompt, card_url
from app.models import Approval
from app.status import ApprovalType, Decision

ANSWERS = (Decision.CONFIRM, Decision.DECLINE)


@dataclass
class Press:
    """One verified press of a card's button."""

    connector: str
    presser: str  # the service's id of whoever pressed
    chat: str  # where the card's message is (a Slack channel, a Telegram chat)
    message: str  # which message (Slack's ts, Telegram's message_id)
    value: str  # the button's signed value
    reply: str = ""  # how to answer the presser alone (Telegram's callback query id)


def _mac(approval_id: str, decision: str, service: str, chat: str) -> str:
    key = current_app.config["SECRET_KEY"].encode()
    return hmac.new(key, f"button:{approval_id}:{decision}:{service}:{chat}".encode(), hashlib.sha256).hexdigest()[:16]


def value(approval_id: str, decision: str, service: str, chat: str) -> str:
    """A button's value: "<c|d>:<card id>:<mac>" (51 characters, within Telegram's 64 bytes), the
    mac over the card, the answer, the service and the chat it is posted in."""
    return f"{decision[0]}:{approval_id}:{_mac(approval_id, decision, service, chat)}"


def read(press: Press) -> tuple[str, str] | None:
    """The (card id, answer) a press's value names, if it was made by this app for this chat."""
    letter, _, rest = press.value.partition(":")
    approval_id, _, mac = rest.partition(":")
    decision = {"c": Decision.CONFIRM, "d": Decision.DECLINE}.get(letter)
    if decision is None or not hmac.compare_digest(
        mac.encode(), _mac(approval_id, decision, press.connector, press.chat).encode()
    ):
        return None
    return approval_id, decision


def answerable(approval: Approval) -> bool:
    """Whether a chat button may answer this card: a confirm card needing one signature. A form, or
    a card needing a countersignature, gets only its Open link (it is answered signed in)."""
    return approval.type == ApprovalType.CONFIRM and not approval.countersign


def buttons(approval: Approval, service: str, chat: str) -> list[dict[str, str]]:
    """What the card's message offers: Confirm and Decline where a press may answer, and Open."""
    found = [{"label": "Open", "url": card_url(approval.id)}]
    if answerable(approval):
        found[:0] = [{"label": d.title(), "value": value(approval.id, d, service, chat), "decision": d} for d in ANSWERS]
    return found


def settled_text(prompt: Prompt) -> str:
    """The card's message once decided: its own sentence, then its outcome and who decided."""
    return f"{prompt.text}\n{prompt.chat}"
