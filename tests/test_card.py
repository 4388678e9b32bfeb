"""The card in the browser's HTML: built from the action, answered once, shown in its new state."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import AuditEvent, Post
from tests.conftest import outcome_row
from tests.helpers.prompts import newest_prompt, prompt_of, shown_in_html


def post_exists(app, post_id):
    with app.app_context():
        return db.session.get(Post, post_id) is not None


def test_delete_post_shows_the_actions_card(app, alice, posts):
    convo = alice.new_conversation()
    html = alice.say(convo, f"/delete_post post={posts['Spring meetup']}")
    prompt = newest_prompt(app)
    shown_in_html(prompt, html)  # its words, its rows, and a token: the engine's Prompt, rendered
    assert prompt.text == "Delete this post? This cannot be undone."
    assert ("Post", "Spring meetup") in [(row.label, row.value) for row in prompt.rows]


def test_a_decided_card_shows_its_prompts_outcome_and_no_token(app, alice, posts):
    approval, token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Launch notes']}"))
    html = alice.answer(approval, token, "decline").get_data(as_text=True)
    prompt = prompt_of(app, approval)
    assert prompt.token is None and prompt.outcome == "Declined"
    shown_in_html(prompt, html)


def test_confirm_runs_handle_once_and_shows_done(app, alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert post_exists(app, posts["Spring meetup"])  # nothing ran before the confirm
    response = alice.answer(approval, token)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert outcome_row("Removed", "done") in html
    assert "Deleted “Spring meetup”." in html  # the model's continuation, under the card
    assert handle_calls["n"] == 1
    assert not post_exists(app, posts["Spring meetup"])


def test_decline_leaves_the_post(app, alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Launch notes']}"))
    html = alice.answer(approval, token, "decline").get_data(as_text=True)
    assert outcome_row("Declined", "declined") in html
    assert "The person declined. Nothing was done." in html
    assert handle_calls["n"] == 0
    assert post_exists(app, posts["Launch notes"])


def test_second_press_runs_nothing(alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert alice.answer(approval, token).status_code == 200
    again = alice.answer(approval, token)
    assert again.status_code == 409
    assert "You already confirmed this card at " in again.get_data(as_text=True)  # her own answer, said so
    assert outcome_row("Removed", "done") in again.get_data(as_text=True)  # the card still shows what happened
    assert handle_calls["n"] == 1


def test_confirm_by_get_is_not_allowed(alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert alice.client.get(f"/approvals/{approval}/confirm?token={token}").status_code == 405
    assert handle_calls["n"] == 0


def test_post_without_csrf_is_refused(alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    response = alice.client.post(f"/approvals/{approval}/confirm", data={"token": token})
    assert response.status_code == 400
    assert handle_calls["n"] == 0


def test_card_page_renders_for_its_person_only(app, alice, sign_in, posts):
    convo = alice.new_conversation()
    approval, _ = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    page = alice.client.get(f"/approvals/{approval}")
    assert page.status_code == 200
    shown_in_html(prompt_of(app, approval), page.get_data(as_text=True))
    assert sign_in("bob@example.com").client.get(f"/approvals/{approval}").status_code == 403
    assert sign_in("carol@example.com").client.get(f"/approvals/{approval}").status_code == 404


def test_confirm_is_never_focused_by_default(alice, posts):
    convo = alice.new_conversation()
    html = alice.say(convo, f"/delete_post post={posts['Spring meetup']}")
    card = html[html.index('class="card') :]
    assert "autofocus" not in card
    assert card.index(">Decline</button>") < card.index(">Confirm</button>")


def test_every_decision_is_audited(app, alice, sign_in, posts):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    alice.answer(approval, token)
    alice.answer(approval, token)  # second press: a refused attempt
    with app.app_context():
        rows = db.session.scalars(sa.select(AuditEvent).where(AuditEvent.approval_id == approval).order_by(AuditEvent.id)).all()
        assert [(r.event, r.outcome) for r in rows] == [
            ("approval.created", "pending"),
            ("approval.decided", "done"),
            ("approval.attempt", "refused_attempt"),
        ]
        assert rows[-1].detail == "already_done"
