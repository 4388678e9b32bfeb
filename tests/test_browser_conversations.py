"""Conversations people manage, in a real Chromium (issue 17): Enter sends and Shift+Enter makes a
new line (an IME's Enter only composes), each message shows its time in the person's own time
zone and has a Copy button, and rename, delete and search work from the page."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import Conversation, User
from tests.helpers.browser import COUNT_STREAMED, LONG, ask, caught_up, composer_done, sent_messages, sign_in_and_open_chat
from tests.helpers.browser import held as held_request

pytestmark = pytest.mark.browser

TOKYO = "Asia/Tokyo"  # a zone far from UTC, so a time shown in UTC cannot pass for local


@pytest.fixture
def tab(browser, server):
    """A page in Tokyo, in English, allowed to use the clipboard, that accepts confirm() dialogs."""
    context = browser.new_context(
        viewport={"width": 1100, "height": 760},
        timezone_id=TOKYO,
        locale="en-US",
        permissions=["clipboard-read", "clipboard-write"],
    )
    tab = context.new_page()
    tab.set_default_timeout(LONG)
    tab.confirms = []
    tab.on("dialog", lambda dialog: (tab.confirms.append(dialog.message), dialog.accept()))
    yield tab
    context.close()


def test_shift_enter_makes_a_new_line_and_enter_sends(tab, server):
    sign_in_and_open_chat(tab, server)
    box = tab.get_by_label("Message")
    box.fill("first line")
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "first line\nsecond line"
    assert sent_messages(tab).count() == 0
    box.press("Enter")
    expect(sent_messages(tab)).to_have_count(1)
    assert sent_messages(tab).first.locator("p").inner_text() == "first line\nsecond line"
    expect(box).to_have_value("")


def test_an_enter_that_ends_an_ime_composition_does_not_send(tab, server):
    """The handler claims (preventDefault) an Enter only when it sends: a composing one is left
    to the input method, and a plain one is claimed."""
    sign_in_and_open_chat(tab, server)
    tab.get_by_label("Message").fill("にほんご")
    press = """composing => {
      const box = document.getElementById("text");
      const event = new KeyboardEvent("keydown", {key: "Enter", bubbles: true, cancelable: true, isComposing: composing});
      box.dispatchEvent(event);
      return event.defaultPrevented;
    }"""
    assert tab.evaluate(press, True) is False
    assert tab.get_by_label("Message").input_value() == "にほんご"
    assert tab.evaluate(press, False) is True
    expect(sent_messages(tab)).to_have_count(1)
    assert sent_messages(tab).first.locator("p").inner_text() == "にほんご"


def test_each_message_shows_its_time_in_the_persons_zone(tab, server):
    sign_in_and_open_chat(tab, server)
    ask(tab, "hello")
    tab.locator(".message--assistant").first.wait_for()
    tab.reload()  # the stored messages, as the page renders them
    times = tab.locator(".message__meta time[data-local]")
    expect(times).to_have_count(2)
    for i in range(2):
        time = times.nth(i)
        expect(time).to_be_visible()
        stamp = time.get_attribute("datetime")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
        local = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(ZoneInfo(TOKYO))
        shown = time.inner_text()
        assert f"{local.hour % 12 or 12}:{local.minute:02d}" in shown and "UTC" not in shown
        assert time.get_attribute("title").endswith("UTC")  # the server's words, kept in the tooltip


def test_a_new_message_gets_its_local_time_too(tab, server):
    sign_in_and_open_chat(tab, server)
    ask(tab, "hello")
    expect(tab.locator(".message--assistant .message__meta time[data-local]")).to_have_count(1)
    expect(tab.locator(".message--user .message__meta time[data-local]")).to_have_count(1)


def test_copy_puts_the_messages_words_on_the_clipboard(app, tab, server):
    tab.add_init_script(COUNT_STREAMED)
    sign_in_and_open_chat(tab, server)
    ask(tab, "a line to copy")
    expect(tab.locator(".message--assistant").first).to_be_visible()
    caught_up(tab, app)  # (the turn's end, when late, replaces the reply with the same reply)
    mine = sent_messages(tab).first
    mine.get_by_role("button", name="Copy").click()
    expect(mine.get_by_role("button", name="Copied")).to_be_visible()
    assert tab.evaluate("navigator.clipboard.readText()") == "a line to copy"
    reply = tab.locator(".message--assistant").first
    reply.get_by_role("button", name="Copy").click()
    expect(reply.get_by_role("button", name="Copied")).to_be_visible()
    expect(mine.get_by_role("button", name="Copy")).to_be_visible()  # the pointer moved on from it
    copied = tab.evaluate("navigator.clipboard.readText()")
    assert copied == reply.locator("p").inner_text().strip() and copied
    assert "Assistant:" not in copied and "Copy" not in copied


def test_a_late_stream_leaves_an_ended_turn_and_the_persons_message_as_they_are(app, tab, server):
    # The event stream waits until the POST's answer has brought the whole turn (the tests run a
    # turn inside the POST), then replays the turn from its start: shown already, it stays.
    streams = []
    tab.route("**/events?*", lambda route: streams.append(route))
    tab.add_init_script(COUNT_STREAMED)
    sign_in_and_open_chat(tab, server)
    ask(tab, "a line to copy")
    reply = tab.locator(".message--assistant")
    expect(reply).to_have_count(1)
    tab.evaluate(SWAPS)
    turn = reply.evaluate("el => el.closest('.turn').id")
    for element in (sent_messages(tab).first, reply):
        element.evaluate("el => { el.dataset.shown = 'first'; }")  # a replaced element loses it
    held_request(tab, streams).continue_()
    assert caught_up(tab, app) >= 3  # the title, the turn's start, its words, its end
    swaps = tab.evaluate("window.swaps")
    assert [turn, "turn turn--live", True] not in swaps, swaps  # the ended turn never went back to writing
    expect(tab.locator("#messages [data-shown='first']")).to_have_count(1)  # the person's message
    expect(sent_messages(tab)).to_have_count(1)
    expect(reply).to_have_count(1)


SWAPS = """() => { window.swaps = [];  // [target, incoming's classes, swapped] once app.js has said
  document.addEventListener("htmx:oobBeforeSwap", (e) => {
    const box = document.createElement("div");
    box.appendChild(e.detail.fragment.cloneNode(true));
    const incoming = box.firstElementChild;
    window.swaps.push([e.detail.target.id, incoming ? incoming.className : "", e.detail.shouldSwap]);
  }); }"""


def test_rename_from_the_page(app, tab, server):
    sign_in_and_open_chat(tab, server)
    ask(tab, "hello")
    tab.locator(".message--assistant").first.wait_for()
    tab.get_by_text("Rename or delete").click()
    tab.get_by_label("New title").fill("Plans for <b>spring</b>")
    tab.get_by_role("button", name="Rename").click()
    expect(tab.locator("#manage-note")).to_have_text("Renamed.")
    expect(tab.get_by_role("heading", level=1)).to_have_text("Plans for <b>spring</b>")
    expect(tab.locator(".sidebar [aria-current] a")).to_have_text("Plans for <b>spring</b>")
    with app.app_context():
        assert db.session.scalar(sa.select(Conversation.title)) == "Plans for <b>spring</b>"


def test_an_empty_title_is_refused_on_the_page(app, tab, server):
    sign_in_and_open_chat(tab, server)
    tab.get_by_text("Rename or delete").click()
    tab.get_by_label("New title").fill("   ")
    tab.get_by_role("button", name="Rename").click()
    expect(tab.locator("#manage-note [role=alert]")).to_have_text("A title needs at least one character.")
    expect(tab.get_by_role("heading", level=1)).to_have_text("New conversation")


def test_delete_from_the_page_asks_first_and_lands_on_the_list(app, tab, server, posts, shots):
    with app.app_context():  # two older conversations, for the sidebar of the README's picture
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        for title in ("Quarterly numbers", "Launch checklist"):
            db.session.add(Conversation(tenant_id=alice.tenant_id, user_id=alice.id, title=title))
        db.session.commit()
    sign_in_and_open_chat(tab, server)
    ask(tab, "/list_posts")
    composer_done(tab, 1)
    ask(tab, f"/delete_post post={posts['Spring meetup']}")
    tab.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
    tab.get_by_text("Rename or delete").click()
    tab.get_by_label("New title").fill("Tidy the blog")
    tab.get_by_role("button", name="Rename").click()
    expect(tab.locator("#manage-note")).to_have_text("Renamed.")
    tab.screenshot(path=str(shots / "conversations.png"))
    tab.get_by_role("button", name="Delete conversation").click()
    tab.wait_for_url(f"{server}/")
    assert tab.confirms == ["Delete this conversation? Cards waiting in it are set aside and nothing in them runs."]
    expect(tab.get_by_role("alert")).to_contain_text("Conversation deleted. 1 waiting card(s) in it were set aside")
    expect(tab.get_by_text("Tidy the blog")).to_have_count(0)
    expect(tab.locator("#conversation-list li")).to_have_count(2)


def test_search_from_the_list_as_the_person_types(app, tab, server):
    sign_in_and_open_chat(tab, server)
    ask(tab, "the budget for 2027")
    composer_done(tab, 1)
    tab.get_by_role("button", name="New conversation").first.click()
    tab.wait_for_url(re.compile(r".*/c/\d+$"))
    ask(tab, "lunch on friday")
    tab.locator(".message--assistant").first.wait_for()
    tab.goto(f"{server}/")
    expect(tab.locator("#conversation-list li")).to_have_count(2)
    tab.get_by_role("searchbox", name="Search your conversations").fill("BUDGET")
    expect(tab.locator("#conversation-list li")).to_have_count(1)
    expect(tab.locator("#conversation-list")).to_contain_text("the budget for 2027")
    tab.get_by_role("searchbox", name="Search your conversations").fill("100%")
    expect(tab.locator("#conversation-list")).to_contain_text("No conversation of yours holds “100%”.")


def test_the_sidebar_search_opens_the_results(app, tab, server):
    sign_in_and_open_chat(tab, server)
    ask(tab, "the budget for 2027")
    tab.locator(".message--assistant").first.wait_for()
    composer_done(tab, 1)
    tab.get_by_role("searchbox", name="Search conversations").fill("budget")
    tab.get_by_role("searchbox", name="Search conversations").press("Enter")
    tab.wait_for_url(re.compile(r".*/\?q=budget$"))
    expect(tab.locator("#conversation-list li")).to_have_count(1)


def test_a_message_coming_back_leaves_the_focus_where_the_person_moved_it(tab, server):
    """The person sends a message and, before its POST comes back, starts typing a search: the
    answer does not pull the focus back to the composer (their Enter would go there)."""
    sign_in_and_open_chat(tab, server)
    held = []
    tab.route("**/messages", lambda route: held.append((route, route.fetch())))
    ask(tab, "first")
    search = tab.get_by_role("searchbox", name="Search conversations")
    search.fill("budget")  # (focused by the fill)
    expect(tab.locator("#composer.htmx-request")).to_have_count(1)
    route, response = held_request(tab, held)
    route.fulfill(response=response)
    composer_done(tab, 1)
    expect(search).to_be_focused()


def test_words_typed_before_the_message_comes_back_are_kept(tab, server):
    """The composer clears what was sent, never what the person typed after: here they type their
    next words while the message's POST is on its way."""
    sign_in_and_open_chat(tab, server)

    def type_meanwhile(route):
        tab.evaluate("document.getElementById('text').value = 'the next thought'")
        route.continue_()

    tab.route("**/messages", type_meanwhile)
    ask(tab, "first")
    composer_done(tab, 1)
    assert sent_messages(tab).first.locator("p").inner_text() == "first"
    assert tab.get_by_label("Message").input_value() == "the next thought"
