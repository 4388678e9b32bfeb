"""In Chromium: a refused message (over the length limit) shows why, and the words stay in the
composer to be shortened — nothing the person typed is lost (issue 13, point 13)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import Message
from tests.helpers.browser import LONG, ask, sign_in_and_open_chat

pytestmark = pytest.mark.browser


def test_an_over_long_message_is_refused_in_place_and_stays_in_the_composer(app, page, server):
    sign_in_and_open_chat(page, server)
    words = "y" * 4001
    ask(page, words)
    note = page.get_by_role("alert")
    note.wait_for()
    assert note.inner_text().startswith("Messages are limited to 4000 characters; this one has 4001.")
    assert page.get_by_label("Message").input_value() == words
    assert page.locator("html").count() == 1 and page.locator("#messages h1").count() == 0  # a note, not a page
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Message)) == 0
    ask(page, "/list_posts")  # a message the server keeps clears the box as before
    page.get_by_text("Spring meetup").first.wait_for()
    # (the reply streams in, so it may show before the POST's answer clears the box)
    expect(page.get_by_label("Message")).to_have_value("", timeout=LONG)
