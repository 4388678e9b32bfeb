"""The chat services Countersign speaks, by name (in wait keys, identities, threads and the audit
log's channel)."""

from __future__ import annotations

from app.connectors import email, slack, telegram
from app.connectors.base import Connector

CONNECTORS: dict[str, Connector] = {c.name: c for c in (telegram.Telegram(), slack.Slack(), email.Email())}
