"""The approval machine: a card or a form is created for a call, and every answer to it — confirm,
decline, cancel, submit, edit, refresh, the countersignature — is verified, claimed, checked again
(authorize, rebuild, compare) and only then handled, in one place; expiry and revoke end it, and
a queued card's delivery settles it. A Prompt is one card as one viewer sees it (prompt_for: who
gets a token). The one path to an approval's handle() (DESIGN §4). Its modules are private: this
list is the package."""

from __future__ import annotations

from app.copilot.approvals._answer import answer
from app.copilot.approvals._cards import card_url
from app.copilot.approvals._countersigning import countersign, may_countersign, waiting_for
from app.copilot.approvals._decline import REASON_MAX
from app.copilot.approvals._delivery import JOB as DELIVERY_JOB
from app.copilot.approvals._delivery import NOTICE, deliver
from app.copilot.approvals._machine import (
    cancel,
    create,
    create_form,
    due_for_expiry,
    expire,
    mark_interrupted,
    pending_for,
    revoke,
    short,
    supersede,
)
from app.copilot.approvals._outcomes import card_label, chat_outcome, decided_by_line
from app.copilot.approvals._prompt import Prompt, Row, may_see, prompt_for, recover
from app.copilot.approvals._revise import edit_form, fresh_id, standing, told
from app.copilot.approvals._tokens import Actor, ChannelProof, may_answer, sign, sign_second

__all__ = [
    "DELIVERY_JOB",
    "NOTICE",
    "Prompt",
    "REASON_MAX",
    "Actor",
    "ChannelProof",
    "Row",
    "answer",
    "cancel",
    "card_label",
    "card_url",
    "chat_outcome",
    "countersign",
    "create",
    "create_form",
    "decided_by_line",
    "deliver",
    "due_for_expiry",
    "edit_form",
    "expire",
    "fresh_id",
    "mark_interrupted",
    "may_answer",
    "may_countersign",
    "may_see",
    "pending_for",
    "prompt_for",
    "recover",
    "revoke",
    "sign",
    "sign_second",
    "short",
    "standing",
    "supersede",
    "told",
    "waiting_for",
]
