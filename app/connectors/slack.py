"""Slack: the Events API (signing secret v0 HMAC, five-minute window) and chat.postMessage."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from flask import current_app

from app.connectors.base import Connector, Inbound
from app.connectors.http import post_json
from app.models import ConnectorThread

WINDOW = 300


class Slack(Connector):
    name = "slack"

    def send(self, thread: ConnectorThread, text: str) -> None:
        channel, _, thread_ts = thread.thread_key.partition(":")
        base, token = current_app.config["SLACK_API_BASE"], current_app.config["SLACK_BOT_TOKEN"]
        post_json(f"{base.rstrip('/')}/chat.postMessage", {"channel": channel, "thread_ts": thread_ts, "text": text},
                  headers={"Authorization": f"Bearer {token}"})


def verified(headers: Any, body: bytes, now: float | None = None) -> tuple[bool, str]:
    """Slack's v0 signature over the raw body, within five minutes; (ok, why not)."""
    secret = current_app.config["SLACK_SIGNING_SECRET"] or ""
    stamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not secret or not stamp.isdigit():
        return False, "missing signature"
    if abs((now or time.time()) - int(stamp)) > WINDOW:
        return False, "stale timestamp"
    expected = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode()), "bad signature"


def parse(payload: dict[str, Any]) -> Inbound | None:
    """A person's message event (not a bot's, not an edit), with its thread."""
    event = payload.get("event")
    if not isinstance(event, dict) or (event.get("type") != "message" or event.get("bot_id")
                                       or event.get("subtype") not in (None, "file_share")):
        return None
    thread = f"{event.get('channel')}:{event.get('thread_ts') or event.get('ts')}"
    return Inbound(connector="slack", thread_key=thread, sender=str(event.get("user")), text=event.get("text") or "",
                   event_id=str(payload.get("event_id") or event.get("client_msg_id") or event.get("ts")),
                   has_files=bool(event.get("files")))
