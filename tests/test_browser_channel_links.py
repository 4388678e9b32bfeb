"""The linked-channels settings page in a real Chromium: a code made on the page, sent from a
(fake) Telegram account, the account shown on the page as it comes back and confirmed there, then
unlinked; the same page on a phone's width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.browser import sign_in
from tests.helpers.links import telegram_says

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
