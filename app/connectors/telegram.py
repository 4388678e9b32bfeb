"""Telegram: the Bot API webhook (verified by its secret_token header), sendMessage, and a card's
inline buttons and their callback queries (app.connectors.buttons)."""

from __future__ import annotations

import hmac
from typing import Any

from flask import Request, current_app

from app.connectors.base import Connector, Inbound, Unverified
from app.connectors.buttons import Press, buttons
from app.connectors.http import post_json
from app.copilot.hidden import shown
from app.models import Approval, ConnectorThread

FILES = ("document", "photo", "sticker", "voice", "video", "audio", "animation")
# Someone else's words in the person's message: forwarded, posted through an inline bot, or sent by
# a Business bot on the person's behalf. Such a message is not the person's own: ignored.
NOT_THEIR_WORDS = (
    *("forward_origin", "forward_from", "forward_from_chat", "forward_sender_name", "forward_date"),
    *("is_automatic_forward", "via_bot", "sender_business_bot"),
)
QUOTES = ("blockquote", "expandable_blockquote")


class Telegram(Connector):
    """A Telegram bot's webhook in (its secret-token header), sendMessage out."""

    name = "telegram"
    has_buttons = True
    numbers_messages = True
    path = "/telegram"

    def verify(self, request: Request) -> None:
        """The header Telegram sends with every update, compared in constant time (a 403)."""
        secret = current_app.config["TELEGRAM_WEBHOOK_SECRET"] or ""
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not (secret and hmac.compare_digest(given.encode(), secret.encode())):
            raise Unverified("missing or wrong secret token", status=403)

    def parse(self, payload: dict[str, Any]) -> Inbound | None:
        """A person's new message (text, or a caption, or a file/sticker alone). Not an edit (an edited
        old message is not a reply to a card), not a bot's, not one sent as a chat or channel
        (sender_chat: an anonymous admin, a linked channel), whose `from` names nobody."""
        message = payload.get("message")
        if not isinstance(message, dict) or not all(
            isinstance(message.get(k), dict) and "id" in message[k] for k in ("chat", "from")
        ):
            return None  # not a person's message in a chat (or not shaped like Telegram's)
        if message["from"].get("is_bot") or message.get("sender_chat") is not None:
            return None
        if any(message.get(k) not in (None, False) for k in NOT_THEIR_WORDS):
            return None
        thread = str(message["chat"]["id"])
        # A forum's topic is a thread of its own. Any other message_thread_id is the thread of
        # replies a message sent with Reply belongs to (a group without topics has them too): the
        # group's own thread, where the card it replies to waits.
        topic = _number(message.get("message_thread_id"))
        if message.get("is_topic_message") is True and topic:
            thread += f":{topic}"
        return Inbound(
            connector=self.name,
            thread_key=thread,
            sender=str(message["from"]["id"]),
            text=_text(message),
            event_id=f"{message['chat']['id']}:{message.get('message_id', payload.get('update_id'))}",
            has_files=any(k in message for k in FILES),
            sender_name=_name(message["from"]),
            at=_number(message.get("message_id")),
            replies_to=_replies_to(message, topic),
        )

    def written_after(self, at: str, posted: str) -> bool:
        """Telegram numbers a chat's messages, the bot's and the people's alike, in the order sent."""
        numbers = (at, posted)
        return all(n.isascii() and n.isdigit() for n in numbers) and int(at) > int(posted)

    def press(self, payload: dict[str, Any]) -> Press | None:
        """A press of a card's inline button (a callback query), by a person (not a bot)."""
        query = payload.get("callback_query")
        if not isinstance(query, dict) or not isinstance(query.get("from"), dict) or not isinstance(query.get("message"), dict):
            return None
        sender, message = query["from"], query["message"]
        chat = message.get("chat") if isinstance(message.get("chat"), dict) else {}
        if sender.get("is_bot") or "id" not in sender or "id" not in chat or "message_id" not in message:
            return None
        return Press(
            connector=self.name,
            presser=str(sender["id"]),
            chat=str(chat["id"]),
            message=str(message["message_id"]),
            value=str(query.get("data") or ""),
            reply=str(query.get("id") or ""),
        )

    def send_card(self, thread: ConnectorThread, approval: Approval, text: str) -> tuple[str, str] | None:
        """A card in its chat, with its inline buttons (a reply "yes" still answers it too):
        (chat, message_id)."""
        chat, _, topic = thread.thread_key.partition(":")
        sent = self._send(self._message(chat, text, topic) | {"reply_markup": _keyboard(approval, chat)})
        message = str((sent.get("result") or {}).get("message_id", ""))
        return (chat, message) if message else None

    def post_prompt(self, chat: str, approval: Approval, text: str) -> tuple[str, str]:
        """A card in the person's private chat with the bot (chat: their user id, which is also
        that chat's id): (chat, message_id)."""
        sent = self._send(self._message(chat, text) | {"reply_markup": _keyboard(approval, chat)})
        return chat, str((sent.get("result") or {}).get("message_id", ""))

    def say_to(self, chat: str, text: str) -> None:
        """A message in the person's private chat with the bot."""
        self._send(self._message(chat, text))

    def edit(self, press: Any, text: str) -> None:
        """The pressed card's message reads its outcome (its keyboard gone); the press is answered."""
        self._call("editMessageText", {"chat_id": _chat_id(press.chat), "message_id": int(press.message), "text": shown(text)})
        if getattr(press, "reply", ""):
            self._call("answerCallbackQuery", {"callback_query_id": press.reply})

    def tell(self, press: Any, text: str) -> None:
        """An alert only the presser sees."""
        self._call("answerCallbackQuery", {"callback_query_id": press.reply, "text": shown(text), "show_alert": True})

    def send(self, thread: ConnectorThread, text: str) -> None:
        """Plain text, on purpose: no parse_mode, so nothing in a card or a reply is markup (the
        model's Markdown arrives as app.markdown.to_plain's text, every link's URL in full). With
        HTML or MarkdownV2, one entity Telegram cannot parse refuses the whole message; plain text
        always arrives. No link preview: Telegram would fetch a URL the model wrote, and so send
        whatever its query holds to that site without anyone clicking."""
        chat, _, topic = thread.thread_key.partition(":")
        self._send(self._message(chat, text, topic))

    def _message(self, chat: str, text: str, topic: str = "") -> dict[str, Any]:
        # Every hidden character shown as ⟨U+XXXX⟩ (app/copilot/hidden.py), whoever wrote the words.
        payload: dict[str, Any] = {"chat_id": _chat_id(chat), "text": shown(text), "link_preview_options": {"is_disabled": True}}
        if topic:
            payload["message_thread_id"] = int(topic)
        return payload

    def _send(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._call("sendMessage", payload)

    def _call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One Bot API call: a refusal (HTTP 4xx, or an answer of "ok": false) raises, so nothing
        goes on as if it had been sent (post_card opens a card's wait only once it is)."""
        base, token = current_app.config["TELEGRAM_API_BASE"], current_app.config["TELEGRAM_BOT_TOKEN"]
        answer = post_json(f"{base.rstrip('/')}/bot{token}/{method}", payload)
        if answer.get("ok") is False:
            raise RuntimeError(f"Telegram refused {method}: {answer.get('description') or 'no reason given'}")
        return answer


def _chat_id(chat: str) -> int | str:
    return int(chat) if chat.lstrip("-").isdigit() else chat


def _keyboard(approval: Approval, chat: str) -> dict[str, Any]:
    """The card's inline keyboard: Confirm and Decline (where a press may answer), Open below."""
    offered = buttons(approval, "telegram", chat)
    presses = [{"text": b["label"], "callback_data": b["value"]} for b in offered if "value" in b]
    links = [{"text": b["label"], "url": b["url"]} for b in offered if "url" in b]
    return {"inline_keyboard": [row for row in (presses, links) if row]}


def _replies_to(message: dict[str, Any], topic: str) -> str:
    """The message this one answers with Reply ("" for none). In a forum's topic, every message
    not sent with Reply names the topic's first message (its id is the topic's): that is none."""
    replied = message.get("reply_to_message")
    number = _number(replied.get("message_id")) if isinstance(replied, dict) else ""
    return "" if number == topic and message.get("is_topic_message") is True else number


def _number(value: Any) -> str:
    """A message's or a topic's id as text ("" when it is not a whole number above 0: no id)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else ""


def _name(sender: dict[str, Any]) -> str:
    """How Telegram names the sender: "First Last (@username)", whatever parts it gives."""
    name = " ".join(str(sender[k]) for k in ("first_name", "last_name") if isinstance(sender.get(k), str))
    if isinstance(sender.get("username"), str):
        name = f"{name} (@{sender['username']})".strip()
    return name


def _text(message: dict[str, Any]) -> str:
    """The message's words, its quotes marked as quoted ("> " lines, as in email and Slack): Telegram
    marks a quote with a blockquote entity, not with ">", so a quoted "yes" is never an answer."""
    if isinstance(message.get("text"), str):
        text, entities = message["text"], message.get("entities")
    else:
        text, entities = str(message.get("caption") or ""), message.get("caption_entities")
    spans = sorted(
        (e["offset"], e["offset"] + e["length"])
        for e in (entities if isinstance(entities, list) else [])
        if isinstance(e, dict)
        and e.get("type") in QUOTES
        and isinstance(e.get("offset"), int)
        and isinstance(e.get("length"), int)
    )
    if not spans:
        return text
    units = text.encode("utf-16-le", "surrogatepass")  # entity offsets count UTF-16 code units

    def cut(start: int, end: int | None = None) -> str:  # (a lone surrogate stays one, replaced later)
        return units[start * 2 : None if end is None else end * 2].decode("utf-16-le", "surrogatepass")

    parts, at = [], 0
    for start, end in spans:
        start, end = max(start, at), max(end, start, at)
        parts += [cut(at, start), "\n", *(f"> {line}\n" for line in cut(start, end).splitlines())]
        at = end
    parts.append(cut(at))
    return "".join(parts)
