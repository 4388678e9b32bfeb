"""Every decided card names who decided it and when — "you", an admin by email, the expiry, a
countersigner — on the web card, the card's own page and the API's Prompt."""

from __future__ import annotations

import re

import sqlalchemy as sa

from app.extensions import db
from app.models import Approval
from tests.conftest import outcome_row
from tests.helpers.cards import pending_delete
from tests.helpers.countersign import admin, confirmed, folder, second_token, token_for  # noqa: F401 (fixtures)

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


def api_prompt(app, email: str, approval_id: str, status: str) -> dict:
    """The person's own card as the API's Prompt (a client token's view)."""
    listed = app.test_client().get(f"/api/approvals?status={status}", headers=token_for(app, email, "client"))
    return next(p for p in listed.get_json()["approvals"] if p["id"] == approval_id)


def revoke(admin, approval_id: str) -> None:
    response = admin.client.post(f"/admin/approvals/{approval_id}/revoke", headers={"X-CSRFToken": admin.csrf})
    assert response.status_code == 302


def test_the_persons_own_decline_says_you_and_when(alice, posts):
    html = alice.answer(*pending_delete(alice, posts), "decline").get_data(as_text=True)
    assert outcome_row("Declined", "declined") in html
    assert re.search(rf'<p class="card__decided">Declined by you, {WHEN}</p>', html)


def test_a_submitted_form_says_submitted_by_you(alice, model):
    from app.copilot.kit import tool_call
    from tests.helpers.cards import form_of, submit

    model.enqueue(tool_call("draft_post", title="Launch notes"))
    approval, token = form_of(alice.say(alice.new_conversation(), "write a post"))
    html = submit(alice, approval, token, title="Launch notes", body="b", status="draft").get_data(as_text=True)
    assert re.search(rf'<p class="card__decided">Submitted by you, {WHEN}</p>', html)
    assert "Confirmed by you" not in html


def test_a_second_submit_of_a_form_is_told_it_was_submitted(app):
    headers, client = token_for(app, "alice@example.com", "client"), app.test_client()
    convo = client.post("/api/conversations", headers=headers).get_json()["id"]
    answer = client.post(f"/api/conversations/{convo}/messages", json={"text": "/draft_post"}, headers=headers)
    [form] = answer.get_json()["pending"]
    values = {"token": form["token"], "values": {"title": "T", "body": "B", "status": "draft"}}
    assert client.post(f"/api/approvals/{form['id']}/submit", json=values, headers=headers).status_code == 200
    again = client.post(f"/api/approvals/{form['id']}/submit", json=values, headers=headers)
    assert again.status_code == 409
    said = again.get_json()["message"]
    assert said.startswith("You already submitted this form") and "confirmed this card" not in said


def test_a_revoke_names_the_admin_on_the_persons_card_and_its_page(alice, admin, posts):
    approval_id, _ = pending_delete(alice, posts)
    revoke(admin, approval_id)
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert outcome_row("Revoked", "revoked") in page
    assert re.search(rf"Revoked by admin@example.com, {WHEN}", page) and "Revoked by you" not in page


def test_the_api_prompt_says_who_revoked_it_when_and_who_asked(app, alice, admin, posts):
    approval_id, _ = pending_delete(alice, posts)
    revoke(admin, approval_id)
    prompt = api_prompt(app, "alice@example.com", approval_id, "revoked")
    assert re.fullmatch(rf"Revoked by admin@example.com, {WHEN}", prompt["decided_by"])
    with app.app_context():
        decided_at = db.session.get(Approval, approval_id).decided_at
    assert prompt["decided_at"] == decided_at.isoformat() and prompt["outcome"] == "Revoked"
    assert prompt["requested_by"] == "alice@example.com" and prompt["requested_by_agent"] is False


def test_the_api_prompt_of_a_pending_card_has_no_decider(app, alice, posts):
    approval_id, _ = pending_delete(alice, posts)
    prompt = api_prompt(app, "alice@example.com", approval_id, "pending")
    assert prompt["decided_by"] is None and prompt["decided_at"] is None and prompt["outcome"] is None


def test_a_countersigners_decline_names_them_not_the_person(app, alice, admin, folder):  # noqa: F811
    approval_id = confirmed(alice)
    declined = admin.htmx_post(f"/approvals/{approval_id}/countersign/decline", token=second_token(admin, approval_id))
    assert declined.status_code == 200
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert outcome_row("Declined", "declined") in page
    assert re.search(rf"Confirmed by you; declined by admin@example.com, {WHEN}", page)
    prompt = api_prompt(app, "alice@example.com", approval_id, "declined")
    assert re.fullmatch(rf"Confirmed by you; declined by admin@example.com, {WHEN}", prompt["decided_by"])


def test_a_countersigned_card_names_both_signatures(app, alice, admin, folder):  # noqa: F811
    approval_id = confirmed(alice)
    done = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert done.status_code == 200
    assert re.search(rf"Confirmed by alice@example.com; countersigned by you, {WHEN}", done.get_data(as_text=True))
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert re.search(rf"Confirmed by you; countersigned by admin@example.com, {WHEN}", page)


def test_an_expired_card_says_the_expiry_ended_it_when_its_time_ran_out(app, alice, posts):
    from datetime import timedelta

    from app import copilot
    from app.models import utcnow

    approval_id, _ = pending_delete(alice, posts)
    ran_out = utcnow() - timedelta(hours=3)  # swept only now: the card names the end of its time
    with app.app_context():
        db.session.execute(sa.update(Approval).where(Approval.id == approval_id).values(expires_at=ran_out))
        db.session.commit()
        assert [a.id for a in copilot.expire_due()] == [approval_id]
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert outcome_row("Expired", "expired") in page
    assert f"Ended by the expiry, {ran_out:%Y-%m-%d %H:%M} UTC" in page
