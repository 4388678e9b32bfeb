"""Messages to the bot from any chat account (linked or not), as Telegram and Slack post them:
for the tests of linking a person's own accounts (app.auth.links)."""

from __future__ import annotations

import itertools
import json
import time

from tests.fake_chat import TELEGRAM_SECRET, slack_headers

updates = itertools.count(5000)


def telegram_says(app, chat, sender, text, name="Stranger"):
    """A private message to the bot from any Telegram account, as Telegram posts it."""
    update = next(updates)
    message = {
        "message_id": update,
        "from": {"id": int(sender), "is_bot": False, "first_name": name},
        "chat": {"id": int(sender), "type": "private"},
        "date": int(time.time()),
        "text": text,
    }
    body = json.dumps({"update_id": update, "message": message})
    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET}
    assert app.test_client().post("/connectors/telegram", data=body, headers=headers).status_code == 200
    chat.work()
    return [p["text"] for p in chat.api.posts if p.get("chat_id") == int(sender)][-1]


def slack_says(app, chat, sender, text):
    """A direct message to the Slack app from any Slack user, as the Events API posts it."""
    ts = f"{time.time():.6f}"
    event = {"type": "message", "channel": f"D{sender}", "user": sender, "text": text, "ts": ts, "channel_type": "im"}
    body = json.dumps({"type": "event_callback", "team_id": "T1", "event": event, "event_id": f"Ev{next(updates)}"})
    assert app.test_client().post("/connectors/slack/events", data=body, headers=slack_headers(body)).status_code == 200
    chat.work()
    return [p["text"] for p in chat.api.posts if p.get("channel") == f"D{sender}"][-1]
