"""Approve anywhere, in a real Chromium: the linked-channels settings page (a code made on the page,
sent from a (fake) Telegram account, the account shown as it comes back and confirmed there, then
unlinked), and a card's open page following a press of its button in Telegram."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import Approval
from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.browser import sign_in
from tests.helpers.links import telegram_says
from tests.helpers.people import agent_asks
from tests.helpers.presses import buttons_of, card_posts, telegram_press

pytestmark = pytest.mark.browser

services, app_config, _chat = chat_fixtures()


def test_link_a_telegram_account_with_a_code_then_unlink_it(app, page, server, services, shots):
    telegram = Chat(app, "telegram", services)  # alice's 111 is linked already; she adds her phone's 444
    sign_in(page, server)
    page.get_by_role("link", name="Linked channels").click()
    page.get_by_role("heading", name="Linked channels").wait_for()
    page.get_by_role("button", name="Link Telegram", exact=True).click()
    code = re.search(r"cs-[0-9a-f]{20}", page.locator("#link-code code").inner_text()).group(0)
    telegram_says(app, telegram, "444", f"/start {code}", name="Alice's phone")
    claim = page.get_by_role("alert").filter(has_text="Alice's phone")  # the page asks again until it comes
    claim.wait_for()
    page.screenshot(path=str(shots / "link-telegram.png"))
    claim.get_by_role("button", name="Yes, link it").click()
    linked = page.locator("#linked")
    expect(linked).to_contain_text("444")
    page.get_by_role("button", name="Unlink telegram 444").click()
    expect(linked).not_to_contain_text("444")
    expect(linked).to_contain_text("111")


def test_a_press_in_telegram_shows_on_her_open_card_page_at_once(app, page, server, services, posts):
    """An agent's card reaches alice's Telegram; she has its page open on the web too; her press in
    Telegram decides it, and the page shows the outcome without a reload."""
    telegram = Chat(app, "telegram", services)
    agent_asks(app, posts, "Spring meetup")
    telegram.work()
    card = next(p for p in card_posts(telegram.api, "sendMessage") if p["chat_id"] == 111)
    with app.app_context():
        approval_id = db.session.scalar(sa.select(Approval.id))
    sign_in(page, server)
    page.goto(f"{server}/approvals/{approval_id}")
    page.get_by_role("button", name="Confirm").wait_for()
    telegram_press(app, telegram, "111", buttons_of(card)["Confirm"], 111, card["sent_as"])
    expect(page.locator(".card__outcome")).to_contain_text("Removed")
    expect(page.get_by_role("button", name="Confirm")).to_have_count(0)
