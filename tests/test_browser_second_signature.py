"""The second signature in a real Chromium: decline with a reason the model then uses, edit an
email before confirming it, and a changed card's rows with its Fresh card. Takes the README's
pictures (COUNTERSIGN_SCREENSHOTS=1 writes them to docs/screenshots)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolReturnPart

from app.copilot.kit import QueuedModel
from app.extensions import db
from app.models import Post
from tests.helpers.browser import ask, composer_done, settled, sign_in_and_open_chat
from tests.helpers.browser import held as held_request

pytestmark = pytest.mark.browser

WORDS = "in their own words: "
REASON = "Not to Dana: she left the team. Ask me who to send it to."
SUBJECT = "Quarterly numbers, final"


class EchoModel(QueuedModel):
    """The offline model, but a decline's reason it reads is what it answers with: the person can
    see that the words reached it."""

    def _respond(self, messages, info):
        last = messages[-1] if messages else None
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart) and WORDS in str(part.content):
                    self.requests.append(list(messages))
                    reason = json.loads(str(part.content).split(WORDS, 1)[1])
                    return ModelResponse(parts=[TextPart(f"Understood, I will not send it. You said: {reason}")])
        return super()._respond(messages, info)


@pytest.fixture
def app_config(smtp):
    return {"SMTP_URL": smtp.url}


@pytest.fixture
def model(app):
    from app.copilot import engine

    echo = EchoModel()
    with app.app_context():
        engine().use_model(echo)
    return echo


def test_decline_with_a_reason_and_the_model_answers_with_it(app, page, server, model, shots):
    sign_in_and_open_chat(page, server)
    ask(page, '/send_email to=dana@example.org subject="Team lunch" body="Friday at noon?"')
    composer_done(page, 1)
    settled(page)
    card = page.locator(".card").last
    card.get_by_text("Send this email as alice@example.com?").wait_for()
    card.get_by_label("Tell the assistant why").fill(REASON)
    card.get_by_role("button", name="Decline").click()
    page.locator(".card__outcome").get_by_text("Declined declined").wait_for()
    page.get_by_text(f"Understood, I will not send it. You said: {REASON}").wait_for()
    page.screenshot(path=str(shots / "decline-reason.png"))


def test_edit_the_subject_then_confirm_the_fresh_card_sends_the_edit(app, page, server, model, smtp, shots):
    smtp.inbox.messages.clear()
    sign_in_and_open_chat(page, server)
    ask(page, '/send_email to=dana@example.org subject="Numbers" body="Attached are the numbers."')
    # The message's own answer, then htmx's settle, before the card is touched, as in the folder
    # test (a CI rehearsal once saw the press of "Make a fresh card" make no request at all, while
    # the turn's copy came in over the stream just after the answer; the cause is not known).
    composer_done(page, 1)
    settled(page)
    card = page.locator(".card").last
    card.get_by_text("Send this email as alice@example.com?").wait_for()
    card.get_by_text("Edit", exact=True).click()
    assert card.get_by_label("Subject").input_value() == "Numbers"
    card.get_by_label("Subject").fill(SUBJECT)
    page.screenshot(path=str(shots / "edit-card.png"))
    card.get_by_role("button", name="Make a fresh card").click()
    page.locator(".card__outcome").get_by_text("Edited — replaced by a fresh card").wait_for()
    fresh = page.locator(".card--pending").last
    fresh.locator("dd").get_by_text(SUBJECT).wait_for()
    fresh.get_by_role("button", name="Confirm").click()
    page.locator(".card__outcome").get_by_text("Sent done").wait_for()
    page.get_by_text("The person edited: subject.").wait_for()  # the offline model repeats what it read
    assert [m["Subject"] for m in smtp.inbox.messages] == [SUBJECT]
    assert model.requests and SUBJECT not in model.seen()


def test_a_fresh_card_the_stream_brings_before_the_edits_own_answer_shows_once(app, page, server, model):
    """The edit's answer and the event stream both bring the fresh card, in either order. Here the
    answer is held back until the stream's copy is on the page: the page still shows one fresh
    card (it showed two, and a confirm then filled both with its outcome)."""
    held = []
    page.route(re.compile(r"/approvals/[0-9a-f]+/edit$"), lambda route: held.append((route, route.fetch())))
    sign_in_and_open_chat(page, server)
    ask(page, '/send_email to=dana@example.org subject="Numbers" body="Attached are the numbers."')
    card = page.locator(".card").last
    card.get_by_text("Send this email as alice@example.com?").wait_for()
    card.get_by_text("Edit", exact=True).click()
    card.get_by_label("Subject").fill(SUBJECT)
    card.get_by_role("button", name="Make a fresh card").click()
    fresh = page.locator(".card--pending[data-replaces]")
    fresh.locator("dd").get_by_text(SUBJECT).wait_for()  # the stream's copy, while the answer waits
    route, response = held_request(page, held)
    route.fulfill(response=response)
    page.locator(".card__outcome").get_by_text("Edited — replaced by a fresh card").wait_for()
    expect(page.locator(".card[data-replaces]")).to_have_count(1)
    fresh.get_by_role("button", name="Confirm").click()
    page.locator(".card__outcome").get_by_text("Sent done").wait_for()
    expect(page.locator(".card[data-replaces]")).to_have_count(1)


def test_a_changed_card_shows_what_changed_and_a_fresh_card_runs(app, page, server, posts, model, shots):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    card = page.locator(".card").last
    card.get_by_text("Delete this post? This cannot be undone.").wait_for()
    with app.app_context():
        db.session.get(Post, posts["Spring meetup"]).title = "Spring meetup (moved to May)"
        db.session.commit()
    card.get_by_role("button", name="Confirm").click()
    changed = page.locator(".card--changed").last
    changed.get_by_text("Changed — nothing ran").wait_for()
    row = changed.locator(".card__row--changed")
    assert row.locator("dt").inner_text() == "Post"
    assert (
        row.locator("del").inner_text() == "Spring meetup" and row.locator("ins").inner_text() == "Spring meetup (moved to May)"
    )
    page.screenshot(path=str(shots / "changed-card.png"))
    changed.get_by_role("button", name="Fresh card").click()
    fresh = page.locator(".card--pending").last
    fresh.locator("dd").get_by_text("Spring meetup (moved to May)").wait_for()
    # The fresh card comes over the events, often before "Fresh card"'s own answer, which swaps
    # the old card above it: press once that answer is in and settled, as a person would (CI once
    # saw a press in that instant reach no button: no click, no request).
    expect(page.locator(".htmx-request")).to_have_count(0)
    settled(page)
    fresh.get_by_role("button", name="Confirm").click()
    page.locator(".card__outcome").get_by_text("Removed done").wait_for()
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is None
