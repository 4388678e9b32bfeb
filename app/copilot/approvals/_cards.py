"""The card: the action's own sentence and rows (never the model's words), and their digest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from flask import current_app
from pydantic import BaseModel

from app.copilot import lookalike
from app.copilot.actions import Action, ActionContext
from app.copilot.hidden import shown

WARNING = "Warning"  # the card row that says what on it could pass for something else


@dataclass(frozen=True)
class Card:
    """What the person is asked: the action's sentence and rows, and their digest."""

    action: str
    reason: str
    rows: list[dict[str, str]]

    @property
    def digest(self) -> str:
        canonical = json.dumps(
            {"action": self.action, "reason": self.reason, "rows": self.rows},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


def visible(value: Any) -> str:
    """Text for a card: every hidden character (app/copilot/hidden.py, strictly) shown as ⟨U+XXXX⟩."""
    return shown(str(value), strict=True)


def build_card(action: type[Action], ctx: ActionContext, input: BaseModel) -> Card:
    """Ask the action (never the model) for the sentence and the rows. A word on the card that
    mixes scripts (a Cyrillic "а" in "pаypal") adds a Warning row saying so, on every card."""
    instance = action()
    reason = visible(instance.approval_reason(ctx, input))
    summary = {str(k): str(v) for k, v in (instance.approval_summary(ctx, input) or {}).items()}
    odd = [w for text in (reason, *summary.values()) for w in lookalike.warnings(text) if w not in summary.get(WARNING, "")]
    if odd:
        summary[WARNING] = " ".join(filter(None, [summary.get(WARNING, ""), *dict.fromkeys(odd)]))
    rows = [{"label": visible(k), "value": visible(v)} for k, v in summary.items()]
    return Card(action=action.name, reason=reason, rows=rows)


def card_url(approval_id: str) -> str:
    """The card's own page, for links from MCP clients and chat connectors."""
    return f"{current_app.config['PUBLIC_URL'].rstrip('/')}/approvals/{approval_id}"
