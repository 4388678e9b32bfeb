"""Every decision reaches every view, in a real Chromium with two people signed in (alice, and
admin@example.com in a browser context of her own): whatever the admin does to alice's card,
alice's open page shows it at once, without its buttons, and the admin console's counts follow;
a press on a card decided elsewhere says who decided it."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.models import Approval, utcnow
from tests.helpers.browser import (  # noqa: F401 (folder: a fixture)
    LONG,
    ask,
    composer_done,
    folder,
    held,
    sign_in_and_open_chat,
    signed_in,
)

pytestmark = pytest.mark.browser

FOLDER_DELETE = "/manage_files operation=delete_folder path=reports"


@pytest.fixture(autouse=True)
def console_polls_each_second(app):
    """The console looks each second, not every five, so a test waiting for it waits a second. (Not
    for every browser test: an answer's outcome in the admin's queue shows only until the next
    poll, which then lists the queue without it; tests/test_browser_countersign.py looks for it.)"""
    app.config["ADMIN_POLL"] = 1


def pending_now(admin):
    return admin.locator(".stat").filter(has_text="pending now").locator(".stat__value")


def alices_card(page, text: str):
    """The card alice's request made, on her open chat page."""
    card = page.locator(".card").last
    card.get_by_text(text).wait_for()
    return page.locator(f"#approval-{card.get_attribute('data-approval')}")


def confirmed_folder_delete(page, server):
    sign_in_and_open_chat(page, server)
    ask(page, FOLDER_DELETE)
    card = alices_card(page, "Delete the folder reports and everything in it on disk local?")
    card.get_by_role("button", name="Confirm").click()
    expect(card).to_have_class(re.compile(r"\bcard--countersigning\b"))
    expect(card.get_by_role("button", name="Decline")).to_have_count(1)  # she may still withdraw it
    return card


def test_alices_card_follows_the_admins_countersignature_and_so_do_the_counts(page, browser, server, folder):
    card = confirmed_folder_delete(page, server)
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    try:
        admin.goto(f"{server}/admin/")
        expect(pending_now(admin)).to_have_text("1")  # a card waiting for a countersignature is pending
        admin.locator(".countersign-queue").get_by_role("button", name="Countersign").click()
        expect(card).to_have_class(re.compile(r"\bcard--done\b"))  # alice's page, never reloaded
        expect(card.get_by_role("button")).to_have_count(0)
        expect(pending_now(admin)).to_have_text("0")
    finally:
        admin_context.close()


def test_alices_card_follows_the_admins_countersign_decline(page, browser, server, folder):
    card = confirmed_folder_delete(page, server)
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    try:
        admin.goto(f"{server}/admin/")
        admin.locator(".countersign-queue").get_by_role("button", name="Decline").click()
        expect(card).to_have_class(re.compile(r"\bcard--declined\b"))
        expect(card.get_by_role("button")).to_have_count(0)
        expect(pending_now(admin)).to_have_text("0")
    finally:
        admin_context.close()


def test_alices_card_follows_the_admins_revoke_and_the_counts_follow_her_request(page, browser, server, posts):
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    try:
        admin.goto(f"{server}/admin/")
        expect(pending_now(admin)).to_have_text("0")
        sign_in_and_open_chat(page, server)
        ask(page, f"/delete_post post={posts['Spring meetup']}")
        card = alices_card(page, "Delete this post? This cannot be undone.")
        expect(pending_now(admin)).to_have_text("1")  # the console, never reloaded
        admin.locator("tbody tr").filter(has_text="alice@example.com").get_by_role("button", name=re.compile("Revoke")).click()
        expect(card).to_have_class(re.compile(r"\bcard--revoked\b"))
        expect(card.get_by_role("button")).to_have_count(0)
    finally:
        admin_context.close()


def test_a_confirm_in_one_tab_reaches_the_other(page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = alices_card(page, "Delete this post? This cannot be undone.")
    other = page.context.new_page()
    other.goto(page.url)
    there = other.locator(f"#{card.get_attribute('id')}")
    expect(there.get_by_role("button", name="Confirm")).to_have_count(1)
    card.get_by_role("button", name="Confirm").click()
    expect(there).to_have_class(re.compile(r"\bcard--done\b"))
    expect(there.get_by_role("button")).to_have_count(0)


def test_a_press_on_a_card_the_admin_revoked_says_who_revoked_it(page, browser, server, posts):
    page.route(re.compile(r"/events"), lambda route: route.abort())  # her live view is down: the card stays as it was
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = alices_card(page, "Delete this post? This cannot be undone.")
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    try:
        admin.goto(f"{server}/admin/")
        admin.locator("tbody tr").filter(has_text="alice@example.com").get_by_role("button", name=re.compile("Revoke")).click()
        admin.locator("tbody").get_by_text("Nothing matches.").wait_for()
    finally:
        admin_context.close()
    card.get_by_role("button", name="Confirm").click()
    expect(card.locator(".card__error")).to_have_text(
        re.compile(r"admin@example\.com revoked this card at \d\d:\d\d UTC\. Nothing ran\.")
    )


def test_a_card_whose_time_runs_out_shows_expired_without_a_reload(app, page, server, posts):
    page.clock.install()  # the page's own clock, moved on below: no waiting out a real half hour
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = alices_card(page, "Delete this post? This cannot be undone.")
    with app.app_context():  # and the server's: the card's time is up there too
        db.session.get(Approval, card.get_attribute("data-approval")).expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    page.clock.fast_forward("31:00")
    expect(card).to_have_class(re.compile(r"\bcard--expired\b"))
    expect(card.get_by_role("button")).to_have_count(0)


def test_the_admins_countersignature_shows_its_outcome_whatever_the_consoles_poll_brings(app, page, browser, server, folder):
    # A poll that reads the console after the countersignature's commit, but whose reply came
    # before the answer's own, took the card out of the queue: the answer then filled in a card no
    # longer on the page, and the admin never saw what happened. Here the polls come when the
    # test says (ADMIN_POLL an hour): one sent before the answer, answered once it is committed,
    # and one asked while the answer is on its way. htmx queues that second one behind the first
    # (same element), so it is asked again when the first ends, the answer still held: it must
    # not go then. The page counts each poll that leaves while a queue request is open.
    confirmed_folder_delete(page, server)
    app.config["ADMIN_POLL"] = 3600
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    polls, answers = [], []

    def poll(route):
        polls.append(route)
        if len(polls) > 1:
            route.continue_()

    def answer(route):
        if route.request.method == "POST":
            answers.append((route, route.fetch()))
        else:
            route.continue_()

    try:
        admin.goto(f"{server}/admin/")
        queue = admin.locator(".countersign-queue")
        queue.get_by_text("Asked by alice@example.com").wait_for()
        admin.evaluate(
            "window.pollsEnded = 0; window.pollsSentDuringAnswer = 0;"
            " document.addEventListener('htmx:afterRequest',"
            " e => { if (e.detail.elt.id === 'admin-stats') window.pollsEnded++; });"
            " document.addEventListener('htmx:beforeSend', e => { if (e.detail.elt.id === 'admin-stats'"
            " && document.querySelector('#countersign-queue .htmx-request')) window.pollsSentDuringAnswer++; })"
        )
        admin.route("**/admin/live*", poll)
        admin.route(re.compile(r".*/approvals/[0-9a-f]{32}/countersign$"), answer)
        ask_the_console = (
            "() => { const s = document.getElementById('admin-stats'); htmx.ajax('GET', s.getAttribute('hx-get'), {source: s}); }"
        )
        admin.evaluate(ask_the_console)  # the first poll, held before it reaches the server
        held(admin, polls)
        queue.get_by_role("button", name="Countersign").click()
        route, committed = held(admin, answers)  # the countersignature is committed; its answer held
        admin.evaluate(ask_the_console)  # a poll while the answer is on its way: queued, then not sent
        with admin.expect_response("**/admin/live*"):
            polls[0].continue_()  # the first poll now reads the console after the commit
        admin.wait_for_function("() => window.pollsEnded >= 1")  # the page is done with it, and with the queued one
        assert admin.evaluate("window.pollsSentDuringAnswer") == 0, "a poll went while the answer was on its way"
        route.fulfill(response=committed)
        queue.locator(".card__outcome").get_by_text("Deleted done").wait_for()
        expect(queue.get_by_role("button", name="Countersign")).to_have_count(0)
        assert admin.evaluate("window.pollsSentDuringAnswer") == 0
    finally:
        admin_context.close()


def test_the_consoles_poll_waits_while_the_admin_writes_a_decline_reason(page, browser, server, folder, posts):
    confirmed_folder_delete(page, server)
    admin_context, admin = signed_in(browser, server, "admin@example.com")
    try:
        admin.goto(f"{server}/admin/")
        expect(pending_now(admin)).to_have_text("1")
        reason = admin.locator(".countersign-queue textarea").first
        reason.fill("Not the reports folder")
        admin.evaluate(
            "window.polls = 0; document.addEventListener('htmx:beforeRequest',"
            " e => { if (e.detail.elt.id === 'admin-stats') window.polls++; })"
        )
        ask(page, f"/delete_post post={posts['Spring meetup']}")  # the console's state moves on
        alices_card(page, "Delete this post? This cannot be undone.")
        deadline = time.monotonic() + LONG / 1000
        while admin.evaluate("window.polls") < 2:  # two polls come due meanwhile
            assert time.monotonic() < deadline, "the console stopped polling"
            admin.wait_for_timeout(250)
        expect(reason).to_have_value("Not the reports folder")  # what she typed is still there
        reason.fill("")
        reason.evaluate("el => el.blur()")
        expect(pending_now(admin)).to_have_text("2")  # and the console follows again once she stops
    finally:
        admin_context.close()


def test_a_cards_clock_ticking_does_not_move_the_chat_under_the_person(page, server):
    """A card's time left counts down each second. Its tick is no new content: the chat stays where
    it is. (Each tick used to follow the log to its end: a person who had just opened the last
    card's Edit saw the form jump up under the pointer a second later, and a press there could
    land on nothing; CI once saw "Make a fresh card" pressed with no click on any button.)"""
    sign_in_and_open_chat(page, server)
    ask(page, "/send_email to=dana@example.org subject=Numbers body=Hi")
    card = alices_card(page, "Send this email as alice@example.com?")
    card.get_by_text("Edit", exact=True).click()
    expect(card.get_by_label("Subject")).to_be_visible()
    log = page.locator("#messages")
    before = log.evaluate("log => log.scrollTop")
    clock = card.locator("[data-expires]")
    for _ in range(2):  # two ticks of the card's clock
        shown = clock.inner_text()
        expect(clock).not_to_have_text(shown)
    assert log.evaluate("log => log.scrollTop") == before


def test_a_cards_clock_ticking_offers_no_new_words_to_a_person_who_scrolled_up(page, server):
    """Scrolled up to read, the person is offered "New words below" when something new comes: a
    card's clock ticking is not something new."""
    sign_in_and_open_chat(page, server)
    ask(page, "/send_email to=dana@example.org subject=Numbers body=Hi")
    card = alices_card(page, "Send this email as alice@example.com?")
    card.get_by_text("Edit", exact=True).click()  # (a log taller than its box)
    log = page.locator("#messages")
    log.evaluate("log => { log.scrollTop = 0; }")
    page.wait_for_function("() => document.getElementById('messages').scrollTop === 0", timeout=LONG)
    clock = card.locator("[data-expires]")
    for _ in range(2):
        shown = clock.inner_text()
        expect(clock).not_to_have_text(shown)
    expect(page.locator("#new-words")).to_have_class(re.compile(r"\bnew-words--quiet\b"))
    assert log.evaluate("log => log.scrollTop") == 0


def a_long_chat_ending_in_a_card(page, server):
    """A chat taller than its box (three exchanges), its last item a card waiting: that card."""
    sign_in_and_open_chat(page, server)
    for sent in range(1, 4):
        ask(page, f"hello {sent}")
        composer_done(page, sent)
    ask(page, "/send_email to=dana@example.org subject=Numbers body=Hi")
    card = alices_card(page, "Send this email as alice@example.com?")
    # The POST's own answer (the person's message, swapped in again) can come after the card, over
    # the events, on a busy machine: a change to the log after the test scrolls up ("New words
    # below", CI 2026-12-07). The chat is still only once that answer is in.
    composer_done(page, 4)
    assert page.locator("#messages").evaluate("log => log.scrollHeight > log.clientHeight")
    return card


def test_a_press_right_after_jumping_to_the_latest_lands_where_it_was_aimed(page, server):
    """The "Jump to the latest message" button shows while it has focus; pressed, it hands focus to the
    chat, so it leaves the layout then, and not under the person's next press (its place given back
    used to move the log's end between press and release: the card's Edit did not open)."""
    card = a_long_chat_ending_in_a_card(page, server)
    jump = page.locator("#new-words")
    jump.focus()
    jump.click()
    card.get_by_text("Edit", exact=True).click()
    expect(card.locator("details.card__edit")).to_have_attribute("open", "")


def test_a_copy_is_no_new_words_for_a_person_who_scrolled_up(page, server):
    """A button's own label changing ("Copy" to "Copied") is nothing new either."""
    a_long_chat_ending_in_a_card(page, server)
    log = page.locator("#messages")
    log.evaluate("log => { log.scrollTop = 0; }")
    page.wait_for_function("() => document.getElementById('messages').scrollTop === 0", timeout=LONG)
    copy = page.locator(".message--user [data-copy]").first
    copy.click()
    expect(copy).not_to_have_text("Copy")  # its answer, whichever the clipboard gave
    expect(page.locator("#new-words")).to_have_class(re.compile(r"\bnew-words--quiet\b"))
    assert log.evaluate("log => log.scrollTop") == 0


def test_an_edit_in_one_tab_brings_the_fresh_card_to_the_other_right_after_the_old(page, server):
    sign_in_and_open_chat(page, server)
    ask(page, "/send_email to=dana@example.org subject=Numbers body=Hi")
    card = alices_card(page, "Send this email as alice@example.com?")
    other = page.context.new_page()
    other.goto(page.url)
    there = other.locator(f"#{card.get_attribute('id')}")
    expect(there.get_by_role("button", name="Confirm")).to_have_count(1)
    card.get_by_text("Edit", exact=True).click()
    card.get_by_label("Subject").fill("Numbers, corrected")
    card.get_by_role("button", name="Make a fresh card").click()
    expect(there).to_have_class(re.compile(r"\bcard--edited\b"))  # the other tab, never reloaded
    fresh = other.locator(f"#{card.get_attribute('id')} + .card")
    expect(fresh.locator("dd").get_by_text("Numbers, corrected")).to_have_count(1)
    expect(fresh.get_by_role("button", name="Confirm")).to_have_count(1)  # hers to answer there too
    expect(other.locator(".card")).to_have_count(2)  # each once
