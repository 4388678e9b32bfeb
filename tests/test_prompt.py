"""One view of a card for one viewer (approvals.prompt_for): the one rule for who gets a token, what
the card says (the action's words only), its outcome and who decided it; and recover, the card
as it now stands after a refused answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from app import copilot
from app.copilot.approvals import prompt_for, recover, sign
from app.errors import AlreadyDecided, NotFound, WrongPerson
from app.extensions import db
from app.models import Approval, utcnow
from app.status import ApprovalType, Status
from tests.helpers.countersign import card_for, folder  # noqa: F401 (folder: a fixture)
from tests.helpers.prompts import ask, prompt_of, viewer


@pytest.fixture
def card(app, posts):
    """alice's pending card: delete the draft "Spring meetup"."""
    return ask(app, f"/delete_post post={posts['Spring meetup']}")


def answer(app, approval_id, decision="confirm", email="alice@example.com"):
    with app.app_context():
        approval = db.session.get(Approval, approval_id)
        actor = viewer(email)
        return copilot.answer(approval_id, sign(approval, actor.binding), actor, decision).status


def test_the_person_gets_a_token_and_the_actions_own_words(app, card, posts):
    prompt = prompt_of(app, card)
    assert prompt.type == ApprovalType.CONFIRM and prompt.status == Status.PENDING
    assert prompt.text == "Delete this post? This cannot be undone."
    assert [(row.label, row.value) for row in prompt.rows][:3] == [
        ("Post", "Spring meetup"),
        ("Id", f"#{posts['Spring meetup']}"),
        ("Status", "draft"),
    ]
    assert prompt.token is not None and prompt.answerable and prompt.waiting and prompt.mine
    assert prompt.second_token is None and prompt.reply  # a chat reply of hers may answer it too
    assert prompt.outcome is None and prompt.badge is None and prompt.decided_by is None and prompt.told is None
    assert prompt.person == "alice@example.com"


def test_the_persons_token_answers_the_card(app, card, handle_calls):
    with app.app_context():
        actor = viewer("alice@example.com")
        shown = prompt_for(db.session.get(Approval, card), actor)
        assert copilot.answer(card, shown.token, actor, "confirm").status == Status.DONE
    assert handle_calls["n"] == 1


def test_an_agent_credential_gets_no_token(app, card):
    prompt = prompt_of(app, card, agent=True)
    assert prompt.token is None and not prompt.answerable and not prompt.reply
    assert prompt.text == "Delete this post? This cannot be undone."  # it may read what is asked


def test_a_credential_outside_the_actions_toolsets_gets_no_token(app, card):
    assert prompt_of(app, card, toolsets=("files",)).token is None
    assert prompt_of(app, card, toolsets=("blog",)).token is not None


def test_another_person_of_the_tenant_gets_no_token(app, card):
    prompt = prompt_of(app, card, "bob@example.com")
    assert prompt.token is None and prompt.second_token is None and not prompt.mine and not prompt.reply


def test_an_admin_gets_no_token_for_someone_elses_card(app, card):
    prompt = prompt_of(app, card, "admin@example.com")
    assert prompt.token is None and prompt.second_token is None and not prompt.answerable


def test_another_tenants_user_is_not_shown_the_card(app, card):
    with pytest.raises(NotFound):
        prompt_of(app, card, "carol@example.com")


def test_an_expired_card_carries_no_token_and_says_so(app, card):
    with time_machine.travel(utcnow() + timedelta(seconds=app.config["APPROVALS_TTL"] + 1), tick=False):
        prompt = prompt_of(app, card)
    assert prompt.status == Status.PENDING  # not swept yet: past its time all the same
    assert prompt.token is None and not prompt.waiting and not prompt.reply
    assert prompt.badge == Status.EXPIRED and prompt.seconds_left == 0


def test_a_decided_card_carries_no_token_and_says_who_decided(app, card):
    assert answer(app, card, "decline") == Status.DECLINED
    prompt = prompt_of(app, card)
    assert prompt.token is None and not prompt.answerable and prompt.final
    assert prompt.outcome == "Declined" and prompt.badge == Status.DECLINED
    assert prompt.decided_by.startswith("Declined by you, ")
    assert prompt_of(app, card, "bob@example.com").decided_by.startswith("Declined by alice@example.com, ")
    assert prompt.told == "The person declined. Nothing was done."
    assert prompt.chat.startswith("Declined — nothing was done. (Declined by you, ")


def test_a_form_carries_its_elicitation_and_no_rows(app):
    form = ask(app, "/draft_post title=Hello")
    prompt = prompt_of(app, form)
    assert prompt.type == ApprovalType.FORM and prompt.rows == ()
    assert prompt.form["message"] == prompt.text and "body" in prompt.form["requestedSchema"]["properties"]
    assert prompt.token is not None  # its person fills it in
    assert not prompt.reply and prompt.edit is None  # a chat reply never fills a form


def test_a_card_waiting_for_a_countersignature_gives_the_second_token_to_whom_the_rule_allows(app, folder):  # noqa: F811
    card = card_for(app, "alice@example.com", confirm=True)
    second = prompt_of(app, card, "admin@example.com")
    assert second.status == Status.COUNTERSIGNING
    assert second.second_token is not None and second.token is None and second.answerable
    assert second.confirmed_by == "alice@example.com" and second.countersign == "admin"
    mine = prompt_of(app, card)  # she may still withdraw it, never countersign it
    assert mine.token is not None and mine.second_token is None and not mine.reply
    bob = prompt_of(app, card, "bob@example.com")  # not an admin: the rule does not allow him
    assert bob.token is None and bob.second_token is None
    assert prompt_of(app, card, "admin@example.com", agent=True).second_token is None


def test_recover_shows_the_card_as_it_now_stands_with_the_refusal(app, card):
    assert answer(app, card) == Status.DONE
    with app.app_context():
        error = AlreadyDecided("You already confirmed this card.")
        prompt = recover(card, viewer("alice@example.com"), error)
    assert prompt.status == Status.DONE and prompt.token is None
    assert prompt.error == "You already confirmed this card."


def test_recover_never_shows_the_card_to_someone_who_may_not_see_it(app, card):
    with app.app_context():
        error = WrongPerson()
        with pytest.raises(WrongPerson):
            recover(card, viewer("bob@example.com"), error)
        with pytest.raises(NotFound):
            recover(card, viewer("carol@example.com"), NotFound())
