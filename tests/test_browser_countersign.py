"""The two-person rule in a real Chromium: alice confirms a folder delete, it waits, the admin
countersigns it on the console, and it runs once; alice cannot countersign her own, and bob (no
admin) cannot either."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import Approval
from tests.helpers.browser import ask, composer_done, folder, settled, sign_in_and_open_chat, signed_in  # noqa: F401 (folder: a fixture)
from tests.helpers.countersign import handled  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser


def test_a_folder_delete_waits_for_the_admins_countersignature(app, page, browser, server, folder, handled, shots):
    sign_in_and_open_chat(page, server)
    ask(page, "/manage_files operation=delete_folder path=reports")
    card = page.locator(".card").last
    card.get_by_text("Delete the folder reports and everything in it on disk local?").wait_for()
    # (CI once saw this click make no request: it came as the message's own answer swapped the
    # turn in again. The cause was not found; test_browser_chat's press before that answer is
    # kept. Here the answer is waited for, and htmx's settle, before the press.)
    composer_done(page, 1)
    settled(page)
    card.get_by_role("button", name="Confirm").click()
    card = page.locator(".card").last
    card.locator(".card__outcome").get_by_text("Confirmed — waiting for a countersignature").wait_for()
    assert card.get_by_role("button", name="Countersign").count() == 0  # never her own
    assert handled == [] and folder.exists()
    approval_id = card.get_attribute("data-approval")

    page.goto(f"{server}/approvals/{approval_id}")  # her card's own page: still no Countersign for her
    page.get_by_text("Confirmed — waiting for a countersignature").wait_for()
    assert page.get_by_role("button", name="Countersign").count() == 0
    assert page.get_by_role("button", name="Decline").count() == 1

    bob_context, bob = signed_in(browser, server, "bob@example.com")
    assert bob.goto(f"{server}/approvals/{approval_id}").status == 403
    assert bob.get_by_role("button", name="Countersign").count() == 0
    assert bob.goto(f"{server}/admin/").status == 403
    bob_context.close()

    admin_context, admin = signed_in(browser, server, "admin@example.com")
    admin.goto(f"{server}/admin/")
    queue = admin.locator(".countersign-queue")
    queue.get_by_text("Asked by alice@example.com").wait_for()
    queue.get_by_text("Delete the folder reports and everything in it on disk local?").wait_for()
    queue.scroll_into_view_if_needed()
    queue.screenshot(path=str(shots / "countersign-queue.png"))
    queue.get_by_role("button", name="Countersign").click()
    queue.locator(".card__outcome").get_by_text("Deleted done").wait_for()
    admin_context.close()

    assert handled == [("delete_folder", "alice@example.com")]  # once, as alice
    assert not folder.exists()
    with app.app_context():
        assert db.session.get(Approval, approval_id).status == "done"
    page.goto(f"{server}/approvals/{approval_id}")
    page.locator(".card__outcome").get_by_text("Deleted done").wait_for()
