"""Slack: the Events API (signing secret v0 HMAC, five-minute window) and chat.postMessage."""

from __future__ import annotations

from typing import Any

from flask import Request, current_app
from flask.typing import ResponseReturnValue

from app.connectors.base import Connector, Inbound, check_signature
from app.connectors.http import post_json
from app.markdown import to_mrkdwn
from app.models import ConnectorThread


class Slack(Connector):
    """Slack's Events API in (signed with the app's signing secret), chat.postMessage out."""

    name = "slack"
    path = "/slack/events"

    def verify(self, request: Request) -> None:
        """Slack's v0 signature over the raw body, its timestamp within five minutes."""
        secret = current_app.config["SLACK_SIGNING_SECRET"] or ""
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        check_signature(secret, stamp, signature, f"v0:{stamp}:".encode() + request.get_data(), "v0")

    def handshake(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Slack checks a new events URL by asking for its challenge back."""
        if payload.get("type") == "url_verification":
            return {"challenge": payload.get("challenge", "")}
        return None

    def parse(self, payload: dict[str, Any]) -> Inbound | None:
        """A person's new message (not a bot's, not an edit or any other subtype), with its thread.
        The delivery is the message itself (channel and ts): a retry, or the same message under
        another event id, acts once."""
        event = payload.get("event")
        if not isinstance(event, dict) or (
            event.get("type") != "message" or event.get("bot_id") or event.get("subtype") not in (None, "file_share")
        ):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not all(isinstance(v, str) and v for v in (user, channel, ts)):
            return None  # no person to verify, or not shaped like Slack's
        return Inbound(
            connector=self.name,
            thread_key=f"{channel}:{event.get('thread_ts') or ts}",
            sender=str(user),
            text=str(event.get("text") or ""),
            event_id=f"{channel}:{ts}",
            has_files=bool(event.get("files")),
        )

    def acknowledge(self) -> ResponseReturnValue:
        """Slack wants only a 200, within three seconds."""
        return ("", 200)

    def send(self, thread: ConnectorThread, text: str) -> None:
        """Every text escaped for mrkdwn, links not unfurled: a card's rows or an action's result are
        shown as written, never as a mention (<!channel>, <@U1>) or a link."""
        self._post(thread, escape(text))

    def send_reply(self, thread: ConnectorThread, markdown: str) -> None:
        """The model's Markdown as mrkdwn (app.markdown.to_mrkdwn): bold, lists and code as Slack
        shows them, &, < and > escaped, links only to http(s) with their real host after them."""
        self._post(thread, to_mrkdwn(markdown).strip() or escape(markdown))

    def _post(self, thread: ConnectorThread, mrkdwn: str) -> None:
        """Links and images not unfurled: Slack fetches nothing the text names."""
        channel, _, thread_ts = thread.thread_key.partition(":")
        base, token = current_app.config["SLACK_API_BASE"], current_app.config["SLACK_BOT_TOKEN"]
        post_json(
            f"{base.rstrip('/')}/chat.postMessage",
            {"channel": channel, "thread_ts": thread_ts, "text": mrkdwn, "unfurl_links": False, "unfurl_media": False},
            headers={"Authorization": f"Bearer {token}"},
        )


def escape(text: str) -> str:
    """Slack's own escaping: &, < and > as entities (the only characters it parses as control)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
