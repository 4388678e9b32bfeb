"""Slack: the Events API and interactions (signing secret v0 HMAC, five-minute window), and
chat.postMessage, with a card's Block Kit buttons (app.connectors.buttons)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

from flask import Request, current_app
from flask.typing import ResponseReturnValue

from app.connectors.base import Connector, Inbound, check_signature
from app.connectors.buttons import ANSWERS, Press, buttons
from app.connectors.http import post_json
from app.copilot.hidden import shown
from app.markdown import to_mrkdwn
from app.models import Approval, ConnectorThread
from app.status import Decision


class Slack(Connector):
    """Slack's Events API in (signed with the app's signing secret), chat.postMessage out."""

    name = "slack"
    has_buttons = True
    numbers_messages = True
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
            at=str(ts),
        )

    def written_after(self, at: str, posted: str) -> bool:
        """Slack's ts: seconds, a dot, and a sequence within the second, unique and increasing
        within a channel. Anything else is no place."""
        later, earlier = _place(at), _place(posted)
        return later is not None and earlier is not None and later > earlier

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

    def send_card(self, thread: ConnectorThread, approval: Approval, text: str) -> tuple[str, str] | None:
        """A card in its thread, with its buttons (a reply "yes" still answers it too): (channel, ts)."""
        channel, _, thread_ts = thread.thread_key.partition(":")
        return channel, self._post_card(channel, thread_ts, approval, text)

    def post_prompt(self, chat: str, approval: Approval, text: str) -> tuple[str, str]:
        """A card in the person's direct messages with the app (chat: their user id): the DM's own
        channel is opened first (conversations.open), since presses and edits name it: (channel, ts)."""
        channel = self._dm(chat)
        return channel, self._post_card(channel, "", approval, text)

    def say_to(self, chat: str, text: str) -> None:
        """A message in the person's direct messages with the app."""
        self._call("chat.postMessage", {"channel": self._dm(chat), "text": escape(text)})

    def _dm(self, user: str) -> str:
        opened = self._call("conversations.open", {"users": user}, check=False).get("channel")
        return str(opened.get("id") or user) if isinstance(opened, dict) else user

    def _post_card(self, channel: str, thread_ts: str, approval: Approval, text: str) -> str:
        elements = [_button(b) for b in buttons(approval, self.name, channel)]
        blocks = [*_sections(text), {"type": "actions", "block_id": f"card-{approval.id}", "elements": elements}]
        payload: dict[str, Any] = {"channel": channel, "text": escape(text), "blocks": blocks}
        if thread_ts:
            payload["thread_ts"] = thread_ts
        return str(self._call("chat.postMessage", payload).get("ts", ""))

    def edit(self, press: Any, text: str) -> None:
        """The pressed card's message, its buttons gone, reads its outcome."""
        self._call("chat.update", {"channel": press.chat, "ts": press.message, "text": escape(text), "blocks": _sections(text)})

    def tell(self, press: Any, text: str) -> None:
        """An ephemeral message: only the presser sees it."""
        self._call("chat.postEphemeral", {"channel": press.chat, "user": press.presser, "text": escape(text)})

    def interaction(self, body: str) -> Press | None:
        """A verified interaction payload (form-encoded `payload`) as a press of Confirm or Decline;
        anything else (Open is a link, other kinds of interaction) is None."""
        try:
            data = json.loads(parse_qs(body).get("payload", ["{}"])[0])
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("type") != "block_actions":
            return None
        action, user = _first(data.get("actions")), _dict(data.get("user")).get("id")
        container, channel = _dict(data.get("container")), _dict(data.get("channel")).get("id")
        channel = channel or container.get("channel_id")
        ts = container.get("message_ts") or _dict(data.get("message")).get("ts")
        if action.get("action_id") not in ANSWERS or not all(isinstance(v, str) and v for v in (user, channel, ts)):
            return None
        return Press(
            connector=self.name, presser=str(user), chat=str(channel), message=str(ts), value=str(action.get("value") or "")
        )

    def _post(self, thread: ConnectorThread, mrkdwn: str) -> None:
        """Links and images not unfurled: Slack fetches nothing the text names."""
        channel, _, thread_ts = thread.thread_key.partition(":")
        self._call("chat.postMessage", {"channel": channel, "thread_ts": thread_ts, "text": mrkdwn})

    def _call(self, method: str, payload: dict[str, Any], check: bool = True) -> dict[str, Any]:
        """One Web API call. Slack answers a refused one with HTTP 200 and `"ok": false` (a card
        whose blocks it cannot take, a channel it cannot post to): that raises, so nothing goes on
        as if it had been posted (post_card opens a card's wait only once the card is posted)."""
        base, token = current_app.config["SLACK_API_BASE"], current_app.config["SLACK_BOT_TOKEN"]
        if method == "chat.postMessage":
            payload = {**payload, "unfurl_links": False, "unfurl_media": False}
        answer = post_json(f"{base.rstrip('/')}/{method}", payload, headers={"Authorization": f"Bearer {token}"})
        if check and answer.get("ok") is False:
            raise SlackRefused(f"Slack refused {method}: {answer.get('error') or 'no reason given'}")
        return answer


TS = re.compile(r"([0-9]{1,12})\.([0-9]{1,9})")  # (ASCII digits only: \d takes any script's)


def _place(ts: str) -> tuple[int, int] | None:
    """A ts as (seconds, its part of a second in nanoseconds), comparable; None if it is not one."""
    match = TS.fullmatch(ts)
    return (int(match[1]), int(match[2].ljust(9, "0"))) if match else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first(value: Any) -> dict[str, Any]:
    return _dict(value[0]) if isinstance(value, list) and value else {}


SECTION_MAX = 3000  # characters of a section's text, at most (Slack refuses the whole message past it)
SECTIONS_MAX = 49  # sections a card may take: 50 blocks a message, at most, and its buttons are one
_ESCAPED = {"&": 5, "<": 4, ">": 4}  # (their length once escaped)


class SlackRefused(Exception):
    """Slack answered `"ok": false`, or would (a card of more sections than a message takes)."""


def _sections(text: str) -> list[dict[str, Any]]:
    """The text as sections Slack takes: each at most SECTION_MAX characters escaped, cut at a
    line's end where one fits (a card's long row runs over several). Verbatim: Slack makes no link,
    channel or mention of the words (they are a card's, or an outcome's, as written)."""
    rest, pieces = shown(text), []  # (shown once: a piece cut from it is escaped only)
    while len(_escaped(rest)) > SECTION_MAX:
        size, cut = 0, 0
        while size + _ESCAPED.get(rest[cut], 1) <= SECTION_MAX:
            size += _ESCAPED.get(rest[cut], 1)
            cut += 1
        line_end = rest.rfind("\n", 0, cut)
        cut = line_end + 1 if line_end > 0 else cut
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    if len(pieces) > SECTIONS_MAX:  # (Slack would refuse it: refused here, it goes as its link)
        raise SlackRefused(f"a card of {len(pieces)} sections is more than Slack takes")
    return [{"type": "section", "text": {"type": "mrkdwn", "text": _escaped(piece), "verbatim": True}} for piece in pieces]


def _button(offered: dict[str, str]) -> dict[str, Any]:
    """A Block Kit button: Open is a link; Confirm (primary) and Decline (danger) carry their value."""
    button: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": offered["label"]}}
    if "url" in offered:
        return {**button, "url": offered["url"], "action_id": "open"}
    style = "primary" if offered["decision"] == Decision.CONFIRM else "danger"
    return {**button, "value": offered["value"], "action_id": offered["decision"], "style": style}


def escape(text: str) -> str:
    """Slack's own escaping: &, < and > as entities (the only characters it parses as control); and
    every hidden character shown as ⟨U+XXXX⟩ (app/copilot/hidden.py), whoever wrote the words (a
    notice quotes a tool's result, a reply that renders to nothing goes as written). Every text
    this connector posts but the model's mrkdwn (app.markdown.to_mrkdwn, shown already) goes
    through here."""
    return _escaped(shown(text))


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
