"""The chat behaves like the chats people use (issue 24), in a real Chromium: a working bubble and
Stop from the moment the message is accepted, titles that follow the conversation live (heading,
list, tab), the keyboard after a decision, and a phone's 390 × 844 window on every page.
(Following a streaming reply: tests/test_browser_stream.py.)"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.auth import create_token
from app.copilot import events
from app.copilot.turns import _jobs as jobs
from app.extensions import db
from app.models import Approval, Run, User
from app.status import RunStatus
from tests.helpers.browser import LONG, HeldStreams, ask, second_copy, settled, sign_in, sign_in_and_open_chat, swap_in
from tests.services import eventually

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def unstarted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """No worker takes a turn: each stays queued (as under load, before a worker is free); the
    ids of the runs handed over."""
    handed: list[int] = []
    monkeypatch.setattr(jobs, "runs_now", lambda: False)  # (the inline runner would claim it as it is written)
    monkeypatch.setattr(jobs, "submit", handed.append)
    return handed


def test_the_working_bubble_shows_as_soon_as_the_message_is_accepted(page, server, unstarted):
    sign_in_and_open_chat(page, server)
    ask(page, "Are you there?")
    expect(page.locator("#messages .message--user p")).to_have_text("Are you there?")
    live = page.locator("#messages .turn--live .message--live")
    expect(live).to_be_visible()
    expect(live).to_have_attribute("aria-busy", "true")
    expect(page.locator("button.stop")).to_be_visible()
    assert unstarted, "the turn was queued"


def test_stop_before_the_first_words_stops_the_turn(app, page, server, unstarted):
    sign_in_and_open_chat(page, server)
    ask(page, "Count to a thousand")
    stop = page.locator("button.stop")
    expect(stop).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith("/stop") and r.request.method == "POST") as answered:
        stop.click()
    assert answered.value.status == 204
    expect(page.locator("#messages .turn--live")).to_have_count(0)
    expect(stop).to_be_hidden()
    with app.app_context():
        assert db.session.scalar(sa.select(Run.status).where(Run.id == unstarted[0])) == RunStatus.STOPPED


def test_stop_before_the_first_words_says_stopped_and_a_reload_still_does(page, server, unstarted):
    sign_in_and_open_chat(page, server)
    ask(page, "Count to a thousand")
    stop = page.locator("button.stop")
    expect(stop).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith("/stop") and r.request.method == "POST"):
        stop.click()
    notice = page.locator("#messages .message--notice p")
    expect(notice).to_have_text("Stopped. Nothing ran.", timeout=LONG)
    page.reload()
    expect(page.locator("#messages .message--user p")).to_have_text("Count to a thousand", timeout=LONG)
    expect(notice).to_have_text("Stopped. Nothing ran.")


def test_the_first_message_titles_the_heading_the_list_and_the_tab_at_once(page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    expect(page.get_by_role("heading", level=1)).to_have_text("Delete post")
    expect(page.locator(".sidebar [aria-current] a")).to_have_text("Delete post")
    expect(page).to_have_title("Delete post · Countersign")


def test_a_rename_retitles_the_tab(page, server):
    sign_in_and_open_chat(page, server)
    page.get_by_text("Rename or delete").click()
    page.get_by_label("New title").fill("Spring plans")
    page.get_by_role("button", name="Rename").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Spring plans")
    expect(page).to_have_title("Spring plans · Countersign")


def second_tab(page):
    """The same conversation open in another tab of the same browser, following its events."""
    other = page.context.new_page()
    other.set_default_timeout(LONG)
    other.goto(page.url)
    expect(other.locator("#events")).to_have_attribute("sse-connect", re.compile("events"))
    return other


def test_a_first_message_sent_in_one_tab_titles_the_other_tab_live(page, server, posts):
    sign_in_and_open_chat(page, server)
    other = second_tab(page)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    expect(other.get_by_role("heading", level=1)).to_have_text("Delete post")
    expect(other.locator(".sidebar [aria-current] a")).to_have_text("Delete post")
    expect(other).to_have_title("Delete post · Countersign")


def test_a_rename_in_one_tab_retitles_the_other_tab_live(page, server):
    sign_in_and_open_chat(page, server)
    other = second_tab(page)
    page.get_by_text("Rename or delete").click()
    page.get_by_label("New title").fill("Spring plans")
    page.get_by_role("button", name="Rename").click()
    expect(other.get_by_role("heading", level=1)).to_have_text("Spring plans")
    expect(other.locator(".sidebar [aria-current] a")).to_have_text("Spring plans")
    expect(other).to_have_title("Spring plans · Countersign")


def test_focus_moves_to_the_outcome_after_enter_on_confirm(page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = page.locator(".card").last
    expect(card.get_by_role("button", name="Confirm")).to_be_visible()
    settled(page)
    card.get_by_role("button", name="Confirm").focus()
    page.keyboard.press("Enter")
    outcome = page.locator(".card__outcome")
    expect(outcome.locator(".card__label")).to_have_text("Removed")
    expect(outcome.locator(".badge")).to_have_text("done")
    expect(outcome).to_be_focused()
    # What a screen reader hears: the label, the status, and who decided when.
    expect(page.locator("#card-said")).to_have_text(re.compile(r"^Removed \(done\)\. Confirmed by you, 20\d\d-"))


def test_a_late_stream_copy_of_the_turn_leaves_the_focus_on_confirm(page, server, posts):
    # The POST's answer shows the card; the event stream, held until the person is on Confirm,
    # then brings the same turn again (its start, card and end, as a busy machine's late stream
    # does). The waiting card stays the person's, focus and all: Enter still confirms it.
    streams = HeldStreams(page)
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    confirm = page.locator(".card").last.get_by_role("button", name="Confirm")
    expect(confirm).to_be_visible()
    settled(page)
    confirm.focus()
    expect(confirm).to_be_focused()
    turn = page.locator(".turn", has=page.locator(".card")).last
    turn.evaluate("turn => { turn.dataset.before = 'late stream'; }")
    streams.release()
    # The stream's copy has replaced the turn (the mark was on the node it replaced).
    expect(page.locator(".turn[data-before]")).to_have_count(0)
    expect(page.locator(".card--pending")).to_have_count(1)
    expect(confirm).to_be_focused()
    page.keyboard.press("Enter")
    outcome = page.locator(".card__outcome")
    expect(outcome.locator(".card__label")).to_have_text("Removed")
    expect(outcome).to_be_focused()


def test_a_stream_later_than_the_answer_leaves_the_focus_on_the_outcome(app, page, server, posts):
    # The person confirms from the keyboard before the page's event stream has brought anything
    # (held here): then it brings the whole story at once, the turn with its card still waiting,
    # the card's decision, the resumed turn. None of it takes the focus from the outcome, and no
    # stale copy shows the card waiting again.
    streams = HeldStreams(page)
    sign_in_and_open_chat(page, server)
    conversation = int(page.url.rsplit("/", 1)[-1])
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    expect(page.locator(".card").last.get_by_role("button", name="Confirm")).to_be_visible()
    settled(page)
    page.locator(".card").last.get_by_role("button", name="Confirm").focus()
    page.keyboard.press("Enter")
    outcome = page.locator(".card__outcome")
    expect(outcome).to_be_focused()
    with app.app_context():
        ended = sa.select(Run.status).where(Run.conversation_id == conversation)
        eventually(lambda: set(db.session.scalars(ended)) == {RunStatus.DONE}, "the resumed turn ends")
        newest = events.last_id(conversation)
    page.evaluate(
        """() => { window.lastSeen = null;
        document.addEventListener("htmx:sseMessage", (e) => { window.lastSeen = e.detail.lastEventId; }); }"""
    )
    streams.release()
    page.wait_for_function("newest => window.lastSeen === newest", arg=newest)
    expect(page.locator(".card--pending")).to_have_count(0)
    expect(outcome.locator(".card__label")).to_have_text("Removed")
    expect(outcome).to_be_focused()


@pytest.mark.parametrize("delivered", ["the card", "its turn"])
def test_a_copy_of_the_decision_during_the_answers_settle_leaves_the_focus_on_the_outcome(page, server, posts, delivered):
    # The event stream's copy of the decided card can come within the 20 ms after the answer's
    # swap, while htmx's own classes (htmx-added, htmx-settling) are still on the page's card: it
    # says nothing new, so the card and its focused outcome stay (CI once saw the focus lost).
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = page.locator(".card").last
    expect(card.get_by_role("button", name="Confirm")).to_be_visible()
    settled(page)
    card.get_by_role("button", name="Confirm").focus()
    page.keyboard.press("Enter")
    outcome = page.locator(".card__outcome")
    expect(outcome).to_be_focused()
    settled(page)
    card_id = card.get_attribute("id")
    turn_id = page.locator(".turn", has=page.locator(".card")).last.get_attribute("id")
    copy = second_copy(page, card_id if delivered == "the card" else turn_id)
    card.evaluate("card => { card.classList.add('htmx-added', 'htmx-settling'); card.dataset.before = 'settling'; }")
    swap_in(page, copy)
    expect(page.locator(".card[data-before]")).to_have_count(1)
    expect(outcome).to_be_focused()


def test_shift_tab_from_the_message_box_does_not_reach_confirm(page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    expect(page.locator(".card").last.get_by_role("button", name="Confirm")).to_be_visible()
    box = page.get_by_label("Message")
    box.focus()
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") != "text"
    assert page.evaluate("document.activeElement.textContent.trim()") != "Confirm"
    expect(page.get_by_role("button", name="Jump to the latest message")).to_be_focused()


@pytest.fixture
def phone(browser, server):
    # (after the server, so it closes first: its open event stream ends before the server waits
    # for its requests; the other way round, that wait took 5 s)
    context = browser.new_context(viewport=PHONE, is_mobile=True)
    tab = context.new_page()
    tab.set_default_timeout(LONG)
    yield tab
    context.close()


def sideways(tab) -> int:
    """How far a page scrolls sideways on the phone (0: it fits its 390 px). Not against
    innerWidth: a phone's browser widens its layout to a page that overflows."""
    return tab.evaluate("document.documentElement.scrollWidth") - PHONE["width"]


def test_on_a_phone_the_list_is_one_tap_from_the_chat(phone, server):
    sign_in_and_open_chat(phone, server)
    phone.get_by_role("link", name="All conversations").click()
    phone.wait_for_url(f"{server}/")
    expect(phone.get_by_role("heading", level=1)).to_have_text("Your conversations")


def test_on_a_phone_the_composer_stays_at_the_bottom(phone, server):
    sign_in_and_open_chat(phone, server)
    for n in range(4):  # the offline model's help: far more than one screen
        ask(phone, f"hello {n}")
        expect(phone.locator("#messages .message--assistant:not(.message--live)")).to_have_count(n + 1)
    composer = phone.locator("#composer").bounding_box()
    assert composer is not None and composer["y"] + composer["height"] <= PHONE["height"]
    assert phone.evaluate("document.documentElement.scrollHeight") <= PHONE["height"]  # the messages scroll, not the page
    expect(phone.get_by_label("Message")).to_be_in_viewport()


def test_on_a_phone_no_page_scrolls_sideways(app, admin_phone, phone, server, posts):
    phone.goto(f"{server}/login")
    assert sideways(phone) <= 0, "login"
    sign_in_and_open_chat(phone, server)
    ask(phone, f"/delete_post post={posts['Spring meetup']}")
    expect(phone.locator(".card").last.get_by_role("button", name="Confirm")).to_be_visible()
    assert sideways(phone) <= 0, "chat"
    with app.app_context():
        card = db.session.scalar(sa.select(Approval.id))
    phone.goto(f"{server}/approvals/{card}")
    phone.locator(".card").wait_for()
    assert sideways(phone) <= 0, "card page"
    phone.goto(f"{server}/")
    assert sideways(phone) <= 0, "list"
    for path in ADMIN_PAGES:
        admin_phone.goto(f"{server}{path}")
        admin_phone.locator("h1").first.wait_for()
        assert sideways(admin_phone) <= 0, path


ADMIN_PAGES = ("/admin/", "/admin/audit", "/admin/tokens")
# Each word of a cell or of the top bar, and the cells' own words, that the browser laid out on
# more than one line (a word broken mid-word), as "text: word".
BROKEN_WORDS = """els => els.flatMap(el => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), broken = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/\\S+/g)) {
      if (m[0].length > 16) continue;  // a long token (a hash, an id) may break anywhere
      const range = document.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) broken.push(`${el.textContent.trim().slice(0, 40)}: ${m[0]}`);
    }
  }
  return broken;
})"""


@pytest.fixture
def admin_phone(browser, server):
    """The admin, signed in on a phone of their own."""
    context = browser.new_context(viewport=PHONE, is_mobile=True)
    admin = context.new_page()
    admin.set_default_timeout(LONG)
    sign_in(admin, server, "admin@example.com")
    admin.wait_for_url(re.compile(rf"{re.escape(server)}/$"))
    yield admin
    context.close()


def test_on_a_phone_admin_tables_and_the_top_bar_break_no_word(app, admin_phone, phone, server, posts):
    sign_in_and_open_chat(phone, server)
    ask(phone, f"/delete_post post={posts['Spring meetup']}")
    expect(phone.locator(".card").last.get_by_role("button", name="Confirm")).to_be_visible()
    with app.app_context():
        create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), name="laptop agent")
    admin = admin_phone
    for path in ADMIN_PAGES:
        admin.goto(f"{server}{path}")
        expect(admin.locator(".table tbody tr").first).to_be_visible()
        broken = admin.locator(".table th, .table td, .topbar").evaluate_all(BROKEN_WORDS)
        assert broken == [], (path, broken)
        brand = admin.locator(".brand").bounding_box()
        link = admin.locator(".topbar__nav a").first.bounding_box()
        assert brand is not None and link is not None
        apart = link["x"] >= brand["x"] + brand["width"] + 8 or link["y"] >= brand["y"] + brand["height"]
        assert apart, (path, brand, link)  # "Countersign" and "Admin" never run together


def test_a_confirm_pressed_before_the_messages_own_answer_comes_still_confirms(page, server, posts):
    # The event stream brings the turn and its card; the POST's own answer comes later (held here)
    # and swaps the same turn in again while the person's Confirm is on its way: that press is
    # not lost, and the card shows its outcome.
    held = []
    page.route(re.compile(r"/c/\d+/messages$"), lambda route: held.append((route, route.fetch())))
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = page.locator(".card").last
    expect(card.get_by_role("button", name="Confirm")).to_be_visible()
    settled(page)
    card.get_by_role("button", name="Confirm").click()
    for route, answer in held:
        route.fulfill(response=answer)
    expect(page.locator(".card__outcome .card__label")).to_have_text("Removed")
    expect(page.locator(".card--pending")).to_have_count(0)


def confirmed_in_another_tab_while_focused_here(page, server, posts):
    """A card waiting in two tabs of the person's; the focus on its Confirm in `page`, and Confirm
    pressed in the other tab: (this page's Confirm, the other tab)."""
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    here = page.locator(".card").last.get_by_role("button", name="Confirm")
    expect(here).to_be_visible()
    other = second_tab(page)
    there = other.locator(".card").last.get_by_role("button", name="Confirm")
    expect(there).to_be_visible()
    settled(page)
    here.focus()
    expect(here).to_be_focused()
    settled(other)
    there.click()
    return here, other


def test_a_card_decided_in_another_tab_while_focused_here_moves_the_focus_to_its_outcome(page, server, posts):
    # The person's focus is on Confirm here when the card is decided elsewhere (another tab, an
    # admin, a chat): the buttons it was on are gone, so the focus goes to the outcome and the
    # page's live region says what happened, as after an answer given here.
    confirmed_in_another_tab_while_focused_here(page, server, posts)
    outcome = page.locator(".card__outcome")
    expect(outcome.locator(".card__label")).to_have_text("Removed")
    expect(outcome).to_be_focused()
    expect(page.locator("#card-said")).to_have_text(re.compile(r"^Removed \(done\)\. Confirmed by you, 20\d\d-"))


def test_a_late_stream_bringing_the_turn_with_its_card_decided_elsewhere_moves_the_focus_to_the_outcome(page, server, posts):
    # This page's stream is held (a busy machine's late one) while the card is decided in another
    # tab; released, it brings the turn again with the card decided: the focus, on Confirm here,
    # goes to the outcome.
    streams = HeldStreams(page)
    here, other = confirmed_in_another_tab_while_focused_here(page, server, posts)
    expect(other.locator(".card__outcome .card__label")).to_have_text("Removed")
    expect(here).to_be_focused()  # (nothing has reached this page yet)
    streams.release()
    outcome = page.locator(".card__outcome")
    expect(outcome.locator(".card__label")).to_have_text("Removed")
    expect(outcome).to_be_focused()
