"""Bad input from chat services (issue 13, point 13): an over-long message gets a reply saying the
limit and nothing is stored; a lone surrogate is kept, replaced by U+FFFD (a webhook cannot be
refused back to the person, so the words are kept, safely)."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Message
from tests.fake_chat import chat_fixtures
from tests.helpers.messages import LIMIT

services, app_config, chat = chat_fixtures()


def said_by_people(app):
    with app.app_context():
        return list(db.session.scalars(sa.select(Message.text).where(Message.role == "user").order_by(Message.id)))


def test_an_over_long_chat_message_gets_a_reply_saying_the_limit(app, chat):
    chat.say("y" * 4001)
    assert re.sub(r"=\r?\n", "", chat.sent()[-1]) == LIMIT  # (an email's body comes quoted-printable)
    assert said_by_people(app) == []
    chat.say("/list_posts")  # the thread goes on
    assert said_by_people(app) == ["/list_posts"]


def test_a_lone_surrogate_from_a_chat_service_is_stored_replaced(app, chat):
    chat.say("caf\ud800 au lait")
    assert said_by_people(app) == ["caf\ufffd au lait"]
    assert len(chat.sent()) == 1  # and the turn ran: the copilot answered


def test_a_lone_surrogate_beside_a_telegram_quote_is_stored_replaced(app, chat):
    """Telegram's quote entities are counted in UTF-16 units: text that cannot be encoded as UTF-16
    (a lone surrogate) still reads, quote marked (a 500 here once broke the suite)."""
    if chat.name != "telegram":
        pytest.skip("quote entities are Telegram's")
    chat.say("said\ud800\ncaf\u00e9", entities=[{"type": "blockquote", "offset": 0, "length": 5}])
    assert said_by_people(app) == ["\n> said\ufffd\n\ncaf\u00e9"]
