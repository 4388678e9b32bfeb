"""The streamed reply in a real Chromium: the words appear while the model writes them, a reload
mid-reply shows what was said so far and the rest (nothing twice), Stop ends a reply where it
was, and a confirmed card shows its outcome before the model's continuation is written.

Turns run in the app's background pool (as in production) and the model is tests/streamed.py's
StreamedModel: it sends its first word, then waits on a gate the test opens. No sleeps: every
wait is on the DOM (Playwright's own waits) or on a gate."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from tests.helpers.browser import LONG, ask, composer_done, sign_in_and_open_chat
from tests.helpers.browser import held as held_request
from tests.streamed import StreamedModel

pytestmark = pytest.mark.browser

LIVE = "#messages .turn--live"
LIVE_TEXT = "#messages .turn--live [id^='text-']"
# A stored reply (the live bubble is also .message--assistant, with .message--live).
REPLY = "#messages .message--assistant:not(.message--live) p"


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"TURNS_RUNNER": "pool"}


@pytest.fixture
def model(streamed: StreamedModel) -> StreamedModel:
    return streamed


@pytest.fixture
def gate() -> Any:
    """A gate the test opens; opened at teardown too, so a failed test never leaves a worker
    waiting on it."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def console(page: Any) -> list[str]:
    """What the page logged as errors (shown when a test fails)."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: seen.append(f"pageerror: {e}"))
    return seen


def messages_text(page: Any) -> str:
    return page.locator("#messages").inner_text()


def test_the_reply_appears_in_parts_before_the_turn_ends(page, server, model, gate, console):
    model.enqueue("Alpha bravo charlie delta", gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Say four words")
    expect(page.locator("#messages .message--user p")).to_have_text("Say four words", timeout=LONG)

    live = page.locator(LIVE_TEXT)
    expect(live).to_have_text("Alpha", timeout=LONG)
    # The turn is still live: its bubble is there, Stop is offered, and only the first word shows.
    expect(page.locator(LIVE)).to_have_count(1)
    expect(page.locator("#messages .message--live")).to_have_attribute("aria-busy", "true")
    expect(page.locator("button.stop")).to_be_visible()
    assert live.inner_text().strip() == "Alpha"
    assert "bravo" not in messages_text(page)
    assert page.locator(REPLY).count() == 0

    gate.set()
    expect(page.locator(REPLY)).to_have_text("Alpha bravo charlie delta", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)
    expect(page.locator("#messages .message--live")).to_have_count(0)
    expect(page.locator("button.stop")).to_be_hidden()
    # The person's message comes before the reply, each once.
    order = page.locator("#messages .message--user, #messages .message--assistant").evaluate_all(
        "els => els.map(e => e.classList.contains('message--user') ? 'user' : 'assistant')"
    )
    assert order == ["user", "assistant"], (order, console)


def test_a_reload_mid_reply_shows_the_text_so_far_and_the_rest_once(page, server, model, gate, console):
    model.enqueue("Echo foxtrot golf hotel", gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Tell me the second four")
    expect(page.locator(LIVE_TEXT)).to_have_text("Echo", timeout=LONG)

    page.reload()
    expect(page.locator(LIVE_TEXT)).to_have_text("Echo", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(1)
    expect(page.locator("button.stop")).to_be_visible()
    text = messages_text(page)
    assert text.count("Echo") == 1, (text, console)
    assert "foxtrot" not in text
    assert text.count("Tell me the second four") == 1, text

    gate.set()
    expect(page.locator(REPLY)).to_have_text("Echo foxtrot golf hotel", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)
    text = messages_text(page)
    assert text.count("Echo foxtrot golf hotel") == 1, (text, console)
    assert text.count("Echo") == 1, text
    assert text.count("Tell me the second four") == 1, text
    expect(page.locator("#messages .message--user")).to_have_count(1)
    expect(page.locator("#messages .message--assistant")).to_have_count(1)
    expect(page.locator("button.stop")).to_be_hidden()


def test_stop_ends_the_reply_where_it_was(page, server, model, gate, console):
    model.enqueue("India juliett kilo lima", gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Count slowly")
    expect(page.locator(LIVE_TEXT)).to_have_text("India", timeout=LONG)
    stop = page.locator("button.stop")
    expect(stop).to_be_visible()

    # The stop is recorded (its POST answered) before the model may go on.
    with page.expect_response(lambda r: r.url.endswith("/stop") and r.request.method == "POST") as answered:
        stop.click()
    assert answered.value.status == 204
    gate.set()

    notice = page.locator("#messages .message--notice p")
    expect(notice).to_have_count(1, timeout=LONG)
    expect(notice).to_have_text("Stopped. Nothing ran.")
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)
    expect(page.locator(REPLY)).to_have_text("India")  # the words shown so far stay; none after the stop
    text = messages_text(page)
    for later in ("juliett", "kilo", "lima"):
        assert later not in text, (text, console)
    assert text.count("India") == 1, text
    expect(stop).to_be_hidden()


def test_a_confirmed_card_shows_its_outcome_before_the_continuation(
    app,
    page,
    server,
    model,
    gate,
    posts,
    console,
):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")  # nothing queued: the offline model's card
    card = page.locator(".card").last
    expect(card.get_by_text("Delete this post? This cannot be undone.")).to_be_visible(timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)  # the turn paused on its card
    model.enqueue("Deleted as asked", gate=gate)

    card.get_by_role("button", name="Confirm").click()
    outcome = page.locator(".card__outcome")
    expect(outcome).to_have_text("Removed done", timeout=LONG)
    # The outcome is there while the continuation is still live: its first word at most.
    live = page.locator(LIVE_TEXT)
    expect(live).to_have_text("Deleted", timeout=LONG)
    expect(outcome).to_have_text("Removed done")
    expect(page.locator(LIVE)).to_have_count(1)
    text = messages_text(page)
    assert "as asked" not in text, (text, console)

    gate.set()
    reply = page.locator(REPLY)
    expect(reply).to_have_text("Deleted as asked", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)
    expect(outcome).to_have_text("Removed done")
    assert messages_text(page).count("Deleted as asked") == 1
    # Below the card.
    below = page.locator(".card").last.evaluate(
        "(card, reply) => !!(card.compareDocumentPosition(reply) & Node.DOCUMENT_POSITION_FOLLOWING)", reply.element_handle()
    )
    assert below, console
    expect(page.locator("button.stop")).to_be_hidden()


def test_an_agents_message_shows_live_on_the_persons_page_as_the_agents(app, page, server, model, gate, console):
    """Words an agent token posts into the conversation the person has open appear there before
    the reply that answers them, once, marked as the agent's (red team, 2026-12-01: only the
    reply arrived, answering words the page did not show)."""
    import json
    import urllib.request

    from app.auth import create_token
    from app.models import User

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        token = create_token(alice, name="helper-bot", scope="agent")
    model.enqueue("Noted the agent's words", gate=gate)
    sign_in_and_open_chat(page, server)
    convo = int(page.url.rstrip("/").rsplit("/", 1)[1])
    expect(page.locator("#messages")).to_be_attached()
    posted = urllib.request.Request(
        f"{server}/api/conversations/{convo}/messages",
        data=json.dumps({"text": "Yes, delete post 3"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Prefer": "respond-async"},
        method="POST",
    )
    with urllib.request.urlopen(posted, timeout=LONG / 1000) as response:
        assert response.status == 202
    said = page.locator("#messages .message--user")
    expect(said).to_have_count(1, timeout=LONG)
    expect(said.locator("p").first).to_have_text("Yes, delete post 3")
    expect(said.locator(".message__author")).to_have_text("Written by an agent (token 'helper-bot') through the API, not by you.")
    expect(page.locator(LIVE_TEXT)).to_have_text("Noted", timeout=LONG)
    gate.set()
    expect(page.locator(REPLY)).to_have_text("Noted the agent's words", timeout=LONG)
    expect(said).to_have_count(1)
    assert messages_text(page).index("Yes, delete post 3") < messages_text(page).index("Noted the agent's words"), console


def test_a_messages_answer_never_takes_the_place_of_words_already_streaming(page, server, model, gate, console):
    # The POST's answer (the person's message and a waiting bubble) can come after the turn's
    # first words have come over the events, while htmx still settles their swap: by default it
    # gives a swapped element its old attributes until then (20 ms, longer on a loaded machine;
    # here made to last), so the live bubble looked like the empty place it took, and the waiting
    # bubble replaced it, with its words.
    model.enqueue("Echo foxtrot", gate=gate)
    sign_in_and_open_chat(page, server)
    page.evaluate("htmx.config.defaultSettleDelay = 60000")
    answers = []
    page.route("**/messages", lambda route: answers.append((route, route.fetch())))
    ask(page, "Say it")
    expect(page.locator(LIVE_TEXT)).to_have_text("Echo", timeout=LONG)
    route, answer = held_request(page, answers)
    route.fulfill(response=answer)
    composer_done(page, 1)
    expect(page.locator(LIVE_TEXT)).to_have_text("Echo")
    expect(page.locator(LIVE)).to_have_count(1)
    gate.set()
    expect(page.locator(REPLY)).to_have_text("Echo foxtrot", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)


TALL = "Tall\n\n" + "A line of the reply.\n\n" * 40  # one streamed piece taller than the window
IN_VIEW = """() => {
  const words = document.querySelector("#messages .turn--live [id^='text-']");
  return !!words && words.textContent.includes("A line") && words.getBoundingClientRect().bottom <= window.innerHeight;
}"""


def test_the_page_follows_a_streaming_reply(page, server, model, gate, console):
    model.enqueue([TALL, "end"], gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Write a long answer")
    page.wait_for_function(IN_VIEW, timeout=LONG)  # the newest words are in the window, not below it


def test_a_person_who_scrolled_up_stays_there_and_is_offered_the_new_words(page, server, model, gate, console):
    model.enqueue([TALL, "and the last words"], gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Write a long answer")
    page.wait_for_function(IN_VIEW, timeout=LONG)
    page.locator("#messages").evaluate("log => { log.scrollTop = 0; }")
    page.wait_for_function("() => document.getElementById('messages').scrollTop === 0", timeout=LONG)
    gate.set()
    expect(page.locator(REPLY).last).to_have_text("and the last words", timeout=LONG)
    below = page.locator("#new-words")
    expect(below).to_have_text("New words below ↓")
    assert page.locator("#messages").evaluate("log => log.scrollTop") == 0, console  # left where they read
    below.click()
    expect(page.locator(REPLY).last).to_be_in_viewport()
    expect(below).to_have_text("Jump to the latest message")


def test_a_scroll_up_counts_though_new_words_land_before_its_scroll_event(page, server, model, gate, console):
    # A browser dispatches scroll events with its next frame, while new words land (and the page
    # reacts to them) at once: a person who scrolled up just before words came was pulled back.
    model.enqueue([TALL, "and the last words"], gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Write a long answer")
    page.wait_for_function(IN_VIEW, timeout=LONG)
    page.locator("#messages").evaluate(
        "log => { log.scrollTop = 0; log.querySelector('.turn--live [id^=\"text-\"]').append(' more'); }"
    )
    gate.set()
    expect(page.locator(REPLY).last).to_have_text("and the last words", timeout=LONG)
    expect(page.locator("#new-words")).to_have_text("New words below ↓")
    assert page.locator("#messages").evaluate("log => log.scrollTop") == 0, console


def test_retry_runs_a_failed_turn_again_in_its_place(page, server, model, gate, console):
    model.enqueue("Half", fail=RuntimeError("the provider broke"))
    model.enqueue("The whole answer", gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Answer me")
    retry = page.get_by_role("button", name="Retry")
    expect(retry).to_be_visible(timeout=LONG)
    retry.click()
    # The same pass runs again where it failed: its live bubble takes the failed turn's place,
    # and its words show as they come.
    expect(page.locator(LIVE_TEXT)).to_have_text("The", timeout=LONG)
    expect(page.locator("#messages .message--error")).to_have_count(0)
    page.reload()  # the failure's note, now without Retry, gives way to the live words again
    expect(page.locator(LIVE_TEXT)).to_have_text("The", timeout=LONG)
    gate.set()
    expect(page.locator(REPLY)).to_have_text("The whole answer", timeout=LONG)
    expect(page.locator(LIVE)).to_have_count(0, timeout=LONG)
    expect(retry).to_have_count(0)
    assert len(model.requests) == 2, console
