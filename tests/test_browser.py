"""The chat in a real Chromium (Debian's, through Playwright's executable_path)."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import Post
from tests.helpers.browser import LONG, ask, second_copy, settled, sign_in, sign_in_and_open_chat, swap_in

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def test_confirm_deletes_and_shows_done(app, page, server, posts, shots):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = page.locator(".card").last
    card.get_by_text("Delete this post? This cannot be undone.").wait_for()
    assert card.locator("dt").all_inner_texts() == ["Post", "Id", "Status", "Created"]
    assert card.locator("dd").all_inner_texts()[:3] == ["Spring meetup", f"#{posts['Spring meetup']}", "draft"]
    focused = page.evaluate("document.activeElement && document.activeElement.textContent")
    assert focused != "Confirm"
    page.screenshot(path=str(shots / "card-pending.png"))
    card.get_by_role("button", name="Confirm").click()
    page.locator(".card__outcome").get_by_text("Removed done").wait_for()
    page.get_by_text("Deleted “Spring meetup”.").wait_for()
    page.screenshot(path=str(shots / "card-confirmed.png"))
    assert (shots / "card-confirmed.png").stat().st_size > 0
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is None


def test_decline_leaves_the_post(app, page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Launch notes']}")
    card = page.locator(".card").last
    card.get_by_role("button", name="Decline").click()
    page.locator(".card__outcome").get_by_text("Declined declined").wait_for()
    with app.app_context():
        assert db.session.get(Post, posts["Launch notes"]) is not None


def test_markup_in_a_title_is_shown_as_text(app, page, server, add_post):
    post_id = add_post(XSS)
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={post_id}")
    row = page.locator(".card dd").first
    row.wait_for()
    assert row.inner_text() == XSS
    # No element was made from the title anywhere on the page, so no onerror can ever fire (a
    # fixed pause for it would only say "not yet", and less on a slower machine).
    assert page.locator(".card img").count() == 0 and page.locator("img[src='x']").count() == 0
    assert page.dialogs == []


def test_form_for_a_draft_post(app, page, server, shots):
    sign_in_and_open_chat(page, server)
    ask(page, '/draft_post title="Launch notes"')
    form = page.locator(".card--form").last
    form.get_by_text("A few details for your post.").wait_for()
    assert form.get_by_label("Title").input_value() == "Launch notes"
    form.get_by_label("Body").fill("Our launch went well.\nThanks, everyone.")
    form.get_by_label("Status").select_option("published")
    page.screenshot(path=str(shots / "form-pending.png"))
    form.get_by_role("button", name="Submit").click()
    page.locator(".card__outcome").get_by_text("Submitted — filled in: title, body, status done").wait_for()
    page.get_by_text("The person filled in: title, body, status.").wait_for()
    with app.app_context():
        post = db.session.scalar(sa.select(Post).where(Post.body == "Our launch went well.\nThanks, everyone."))
        assert post is not None and post.title == "Launch notes" and post.status == "published"


def test_admin_revokes_alices_pending_card(app, browser, page, server, posts, shots):
    sign_in_and_open_chat(page, server)  # alice
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    page.locator(".card").last.get_by_text("Delete this post? This cannot be undone.").wait_for()
    admin_context = browser.new_context(viewport={"width": 1200, "height": 900})
    admin = admin_context.new_page()
    admin.set_default_timeout(LONG)
    try:
        sign_in(admin, server, "admin@example.com")
        admin.goto(f"{server}/admin/")
        row = admin.locator("tbody tr").filter(has_text="alice@example.com")
        row.get_by_text("Delete this post? This cannot be undone.").wait_for()
        assert row.locator("dd").first.inner_text() == "Spring meetup"
        admin.screenshot(path=str(shots / "admin.png"), full_page=True)
        row.get_by_role("button", name=re.compile("Revoke")).click()
        admin.locator("tbody").get_by_text("Nothing matches.").wait_for()
    finally:
        admin_context.close()
    page.reload()
    page.locator(".card__outcome").get_by_text("Revoked revoked").wait_for()
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is not None


def test_the_card_works_from_the_keyboard(app, page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Launch notes']}")
    card = page.locator(".card").last
    card.get_by_text("Delete this post? This cannot be undone.").wait_for()
    settled(page)
    assert page.evaluate("document.activeElement.id") == "text"  # focus stays in the composer
    card.get_by_role("button", name="Decline").focus()
    page.keyboard.press("Enter")
    page.locator(".card__outcome").get_by_text("Declined declined").wait_for()
    assert card.get_attribute("aria-live") == "polite" and card.get_attribute("role") == "group"
    with app.app_context():
        assert db.session.get(Post, posts["Launch notes"]) is not None


def test_the_chat_fits_a_phone(browser, server, posts, shots):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    phone = context.new_page()
    phone.set_default_timeout(LONG)
    try:
        sign_in_and_open_chat(phone, server)
        ask(phone, f"/delete_post post={posts['Spring meetup']}")
        phone.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scrolling
        phone.screenshot(path=str(shots / "card-phone.png"))
    finally:
        context.close()


def a_waiting_form_and_a_second_copy(page, server):
    """A draft's form waiting in a chat: the form, its turn's id, and that turn's HTML as a second
    delivery would bring it."""
    sign_in_and_open_chat(page, server)
    ask(page, '/draft_post title="Launch notes"')
    form = page.locator(".card--form").last
    form.get_by_text("A few details for your post.").wait_for()
    turn = form.evaluate("el => el.closest('.turn').id")
    return form, turn, second_copy(page, turn)


def test_a_second_copy_of_a_waiting_form_keeps_what_was_typed(page, server):
    """A turn arrives twice (the POST's answer and the event stream, in either order, later under
    load): the copy that comes after the person started typing keeps what they typed; a copy
    in which the form was decided does replace it."""
    form, turn, copy = a_waiting_form_and_a_second_copy(page, server)
    form.get_by_label("Body").fill("typed before the copy came")
    swap_in(page, copy)
    assert page.locator(f"#{turn} .card--form").get_by_label("Body").input_value() == "typed before the copy came"
    swap_in(page, copy.replace("card--pending", "card--expired"))
    expect(page.locator(f"#{turn} .card--form")).to_have_class(re.compile("card--expired"))


def test_a_second_copy_of_a_waiting_form_keeps_the_field_being_typed_in(page, server):
    """The copy that comes while the person types leaves them typing: the field keeps the focus
    and the caret, so the next keys land where they were going."""
    form, turn, copy = a_waiting_form_and_a_second_copy(page, server)
    body = form.get_by_label("Body")
    body.fill("Our went well.")
    body.evaluate("field => { field.focus(); field.setSelectionRange(4, 4); }")
    swap_in(page, copy)
    expect(body).to_be_focused()
    page.keyboard.type("launch ")
    expect(body).to_have_value("Our launch went well.")
