"""Presses of a card's buttons, as Telegram (a callback query on the bot's webhook) and Slack (a
signed block_actions interaction) post them, and the buttons a posted card carries."""

from __future__ import annotations

import itertools
import json
import time
from urllib.parse import urlencode

from tests.fake_chat import SLACK_SECRET, TELEGRAM_SECRET, slack_headers

updates = itertools.count(9000)


def card_posts(api, method):
    """The fake API's posts of `method` (sendMessage, chat.postMessage, editMessageText, …)."""
    return [p for p in api.posts if p["path"].endswith(f"/{method}")]


def buttons_of(post):
    """A posted card's buttons: {label: callback data, value or url}."""
    if "reply_markup" in post:
        return {b["text"]: b.get("callback_data") or b.get("url") for row in post["reply_markup"]["inline_keyboard"] for b in row}
    actions = next((b for b in post.get("blocks", []) if b["type"] == "actions"), {"elements": []})
    return {e["text"]["text"]: e.get("value") or e.get("url") for e in actions["elements"]}


def telegram_press(app, chat, presser, data, chat_id, message_id, update=None):
    """A person's press of an inline button (Telegram's callback query), then the worker's turn."""
    update = update or next(updates)
    query = {
        "id": f"cq{update}",
        "from": {"id": int(presser), "is_bot": False, "first_name": "Someone"},
        "message": {"message_id": message_id, "chat": {"id": chat_id, "type": "private"}, "date": int(time.time())},
        "chat_instance": "1",
        "data": data,
    }
    body = json.dumps({"update_id": update, "callback_query": query})
    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET}
    response = app.test_client().post("/connectors/telegram", data=body, headers=headers)
    chat.work()
    return response


def slack_interaction(presser, channel, ts, value, action="confirm"):
    """The form body of a block_actions interaction on a card's message."""
    payload = {
        "type": "block_actions",
        "user": {"id": presser},
        "channel": {"id": channel},
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "actions": [{"action_id": action, "value": value, "type": "button"}],
        "trigger_id": f"trigger{next(updates)}",
    }
    return urlencode({"payload": json.dumps(payload)})


def slack_press(app, chat, body, stamp=None, secret=SLACK_SECRET):
    """Post an interaction, signed as Slack signs it, then the worker's turn."""
    response = app.test_client().post(
        "/connectors/slack/interactions",
        data=body,
        headers={**slack_headers(body, stamp, secret), "Content-Type": "application/x-www-form-urlencoded"},
    )
    chat.work()
    return response
