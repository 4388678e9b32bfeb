"""The second signature (issue 16): decline with a reason the model reads, edit before confirm
(a fresh card; the model and the audit log learn field names only), and what changed on a stale
card with a Fresh card — on every route, against an attacker's variants."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Approval, AuditEvent, Message, OutboxEmail, Post, User
from app.status import Status
from tests.conftest import api_headers, outcome_row

SECRET_SUBJECT = "Quarterly numbers, final"  # the person's edit: never the model's, never audited
REASON = "Wrong recipient: send it to the team list instead"


@pytest.fixture
def app_config(smtp):
    return {"SMTP_URL": smtp.url}


def row(app, approval_id):
    with app.app_context():
        found = db.session.get(Approval, approval_id)
        db.session.expunge(found)
        return found


def model_read(model):
    """Every text part the model was sent (tool results, prompts), unescaped."""
    return "\n".join(str(getattr(p, "content", "")) for request in model.requests for m in request for p in m.parts)


def audit_text(app):
    with app.app_context():
        return "\n".join(f"{e.event} {e.outcome} {e.detail}" for e in db.session.scalars(sa.select(AuditEvent)))


def email_card(alice, subject="Hello there"):
    convo = alice.new_conversation()
    html = alice.say(convo, f'/send_email to=dana@example.org subject="{subject}" body="See you soon"')
    return convo, *alice.card(html)


def edit(person, approval, token, **values):
    return person.htmx_post(f"/approvals/{approval}/edit", token=token, **values)


def cards_in(html):
    return re.findall(r'id="approval-([0-9a-f]{32})"', html)


# --- decline with a reason ---------------------------------------------------------------------


def test_a_declines_reason_is_stored_and_the_model_reads_it_as_the_persons_words(app, alice, model):
    _, approval, token = email_card(alice)
    response = alice.htmx_post(f"/approvals/{approval}/decline", token=token, reason=REASON)
    assert response.status_code == 200 and outcome_row("Declined", "declined") in response.get_data(as_text=True)
    assert row(app, approval).feedback == REASON
    assert f'The person\'s reason, in their own words: "{REASON}"' in model_read(model)


def test_the_audit_log_says_a_reason_was_given_never_the_reason(app, alice, model):
    _, approval, token = email_card(alice)
    alice.htmx_post(f"/approvals/{approval}/decline", token=token, reason=REASON)
    log = audit_text(app)
    assert "a reason was given" in log and "recipient" not in log


def test_a_decline_without_a_reason_says_only_that_it_was_declined(app, alice, model):
    _, approval, token = email_card(alice)
    alice.htmx_post(f"/approvals/{approval}/decline", token=token, reason="   ")
    assert row(app, approval).feedback is None
    assert "The person declined. Nothing was done." in model_read(model)
    assert "in their own words" not in model_read(model)


def test_a_reason_too_long_is_refused_and_the_card_still_waits_with_it(app, alice, model):
    _, approval, token = email_card(alice)
    long = "x" * 1001
    response = alice.htmx_post(f"/approvals/{approval}/decline", token=token, reason=long)
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "The reason is too long: 1001 characters, at most 1000." in html
    assert long in html  # kept in the box for another try
    assert row(app, approval).status == Status.PENDING
    assert alice.htmx_post(f"/approvals/{approval}/decline", token=token, reason="x" * 1000).status_code == 200


def test_a_reason_on_confirm_is_ignored(app, alice, model, smtp):
    _, approval, token = email_card(alice)
    alice.htmx_post(f"/approvals/{approval}/confirm", token=token, reason=REASON)
    assert row(app, approval).feedback is None and REASON not in model.seen()


def test_api_decline_with_a_reason(app, alice, model):
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        token = create_token(user, scope="client")
    headers = api_headers(token)
    convo = app.test_client().post("/api/conversations", headers=headers).get_json()["id"]
    said = app.test_client().post(
        f"/api/conversations/{convo}/messages", headers=headers, json={"text": "/send_email to=d@example.org subject=Hi body=Yo"}
    )
    card = said.get_json()["pending"][0]
    assert card["edit"]["requestedSchema"]["properties"].keys() == {"to", "subject", "body"}
    too_long = app.test_client().post(
        f"/api/approvals/{card['id']}/decline", headers=headers, json={"token": card["token"], "reason": "y" * 1001}
    )
    assert too_long.status_code == 400
    answered = app.test_client().post(
        f"/api/approvals/{card['id']}/decline", headers=headers, json={"token": card["token"], "reason": REASON}
    )
    assert answered.status_code == 200 and answered.get_json()["status"] == Status.DECLINED
    assert REASON in model.seen()


# --- edit before confirm -----------------------------------------------------------------------


def test_edit_makes_a_fresh_card_that_sends_the_edited_mail_and_the_model_learns_names_only(app, alice, model, smtp):
    smtp.inbox.messages.clear()
    _, approval, token = email_card(alice)
    response = edit(alice, approval, token, subject=SECRET_SUBJECT)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Edited — replaced by a fresh card" in html
    assert f"<dt>Subject</dt><dd>{SECRET_SUBJECT}</dd>" in html
    old, fresh = cards_in(html)
    assert old == approval
    fresh_row = row(app, fresh)
    assert fresh_row.status == Status.PENDING and fresh_row.replaces == approval and fresh_row.edited == ["subject"]
    assert fresh_row.tool_call_id == row(app, approval).tool_call_id  # the model's own call
    assert row(app, approval).status == Status.EDITED
    assert smtp.inbox.messages == []  # an edit runs nothing
    fresh_token = alice.card(html)[1]
    assert outcome_row("Sent", "done") in alice.answer(fresh, fresh_token).get_data(as_text=True)
    assert [m["Subject"] for m in smtp.inbox.messages] == [SECRET_SUBJECT]
    seen = model.seen()
    assert "The person edited: subject." in seen
    assert SECRET_SUBJECT not in seen
    log = audit_text(app)
    assert "edited: subject" in log and SECRET_SUBJECT not in log


def test_the_fresh_card_stays_in_the_chat_after_a_reload(app, alice, model):
    convo, approval, token = email_card(alice)
    fresh = cards_in(edit(alice, approval, token, subject=SECRET_SUBJECT).get_data(as_text=True))[-1]
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    assert fresh in cards_in(page) and approval in cards_in(page)


def test_the_edit_form_is_prefilled_and_offers_only_the_editable_fields(alice, model):
    _, approval, _ = email_card(alice, subject="Lunch on Friday")
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    edit_form = page.split('class="card__edit"', 1)[1].split("</details>", 1)[0]
    assert sorted(re.findall(r'name="(\w+)"', edit_form)) == ["body", "csrf_token", "subject", "to", "token"]
    assert 'value="Lunch on Friday"' in edit_form


def test_a_card_whose_action_edits_nothing_has_no_edit(alice, posts, model):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert "card__edit" not in alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    response = edit(alice, approval, token, post=str(posts["Launch notes"]))
    assert response.status_code == 400 and "cannot be edited" in response.get_data(as_text=True)


@pytest.mark.parametrize("field", ["password", "api_token", "operation", "csrf"])
def test_an_edit_with_a_field_that_is_not_editable_changes_nothing(app, alice, model, field):
    _, approval, token = email_card(alice)
    response = edit(alice, approval, token, subject="Other", **{field: "x"})
    assert response.status_code == 400
    assert "Only to, subject, body can be edited" in response.get_data(as_text=True)
    assert row(app, approval).status == Status.PENDING
    assert "edit_field_not_editable" in audit_text(app)


def test_an_edit_with_an_invalid_value_shows_the_error_and_changes_nothing(app, alice, model):
    _, approval, token = email_card(alice)
    response = edit(alice, approval, token, to="not an address")
    html = response.get_data(as_text=True)
    assert response.status_code == 400 and "field-error" in html and "not an address" in html
    assert " open>" in html  # the Edit form stays open
    assert row(app, approval).status == Status.PENDING and len(cards_in(html)) == 1


def test_an_edit_that_changes_nothing_is_refused(app, alice, model):
    _, approval, token = email_card(alice, subject="Same")
    response = edit(alice, approval, token, subject="Same")
    assert response.status_code == 400 and "Nothing was changed" in response.get_data(as_text=True)
    assert row(app, approval).status == Status.PENDING


@pytest.mark.parametrize("first", ["confirm", "decline"])
def test_a_card_that_is_not_pending_cannot_be_edited(app, alice, model, first):
    _, approval, token = email_card(alice)
    alice.answer(approval, token, first)
    response = edit(alice, approval, token, subject=SECRET_SUBJECT)
    assert response.status_code == 409
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == approval)) == 0


def test_a_second_edit_press_makes_no_second_fresh_card(app, alice, model):
    _, approval, token = email_card(alice)
    assert edit(alice, approval, token, subject="One").status_code == 200
    assert edit(alice, approval, token, subject="Two").status_code == 409
    with app.app_context():
        fresh = list(db.session.scalars(sa.select(Approval).where(Approval.replaces == approval)))
        assert [a.arguments["subject"] for a in fresh] == ["One"]


def test_an_expired_card_cannot_be_edited(app, alice, model):
    from datetime import timedelta

    from app.models import utcnow

    _, approval, token = email_card(alice)
    with app.app_context():
        db.session.execute(sa.update(Approval).where(Approval.id == approval).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert edit(alice, approval, token, subject=SECRET_SUBJECT).status_code == 410
    assert row(app, approval).status == Status.EXPIRED


def test_another_person_or_tenant_cannot_edit(app, alice, sign_in, model):
    _, approval, token = email_card(alice)
    assert edit(sign_in("bob@example.com"), approval, token, subject=SECRET_SUBJECT).status_code == 403
    assert edit(sign_in("carol@example.com"), approval, token, subject=SECRET_SUBJECT).status_code == 404
    assert row(app, approval).status == Status.PENDING
    assert SECRET_SUBJECT not in audit_text(app)


def test_an_agent_token_cannot_edit_even_with_the_cards_token(app, alice, model):
    _, approval, token = email_card(alice)
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        agent_token = create_token(user)  # scope agent, the default
    response = app.test_client().post(
        f"/api/approvals/{approval}/edit", headers=api_headers(agent_token), json={"token": token, "values": {"subject": "x"}}
    )
    assert response.status_code == 403
    assert row(app, approval).status == Status.PENDING
    assert "agent_credential" in audit_text(app)


def test_api_edit_returns_the_fresh_card_to_confirm(app, alice, model, smtp):
    smtp.inbox.messages.clear()
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        token = create_token(user, scope="client")
    headers = api_headers(token)
    client = app.test_client()
    convo = client.post("/api/conversations", headers=headers).get_json()["id"]
    card = client.post(
        f"/api/conversations/{convo}/messages", headers=headers, json={"text": "/send_email to=d@example.org subject=Hi body=Yo"}
    ).get_json()["pending"][0]
    bad = client.post(f"/api/approvals/{card['id']}/edit", headers=headers, json={"token": card["token"], "values": "x"})
    assert bad.status_code == 400
    edited = client.post(
        f"/api/approvals/{card['id']}/edit", headers=headers, json={"token": card["token"], "values": {"subject": SECRET_SUBJECT}}
    )
    assert edited.status_code == 201
    fresh = edited.get_json()["approval"]
    assert fresh["replaces"] == card["id"] and fresh["edited"] == ["subject"]
    assert {"label": "Subject", "value": SECRET_SUBJECT} in fresh["rows"]
    done = client.post(f"/api/approvals/{fresh['id']}/confirm", headers=headers, json={"token": fresh["token"]})
    assert done.get_json()["status"] == Status.DONE
    assert [m["Subject"] for m in smtp.inbox.messages] == [SECRET_SUBJECT]
    assert SECRET_SUBJECT not in model.seen()
    paths = client.get("/api/openapi.json").get_json()["paths"]
    assert {"/api/approvals/{id}/edit", "/api/approvals/{id}/refresh"} <= set(paths)


def test_a_fresh_card_declined_tells_the_model_the_edit_and_the_reason(app, alice, model):
    _, approval, token = email_card(alice)
    html = edit(alice, approval, token, body="A body the model never wrote").get_data(as_text=True)
    fresh, fresh_token = alice.card(html)
    alice.htmx_post(f"/approvals/{fresh}/decline", token=fresh_token, reason="Not today")
    seen = model_read(model)
    assert "The person edited: body. The person declined." in seen and '"Not today"' in seen
    assert "A body the model never wrote" not in seen


# --- what changed ------------------------------------------------------------------------------


def stale_delete_card(app, alice, posts, title="Spring meetup"):
    """A delete card whose post is renamed before the confirm: the card changed."""
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts[title]}"))
    with app.app_context():
        db.session.get(Post, posts[title]).title = "Spring meetup (moved)"
        db.session.commit()
    return convo, approval, token


def test_a_changed_card_shows_the_rows_that_changed_and_a_fresh_card(app, alice, posts, model, handle_calls):
    _, approval, token = stale_delete_card(app, alice, posts)
    html = alice.answer(approval, token).get_data(as_text=True)
    assert "Changed — nothing ran" in html
    assert row(app, approval).changes == [{"label": "Post", "before": "Spring meetup", "after": "Spring meetup (moved)"}]
    assert "<dt>Post</dt>\n        <dd><del>Spring meetup</del> → <ins>Spring meetup (moved)</ins></dd>" in html
    assert "Fresh card" in html and handle_calls["n"] == 0


def test_the_fresh_card_is_built_again_and_runs_once_confirmed(app, alice, posts, model, handle_calls):
    _, approval, token = stale_delete_card(app, alice, posts)
    changed_html = alice.answer(approval, token).get_data(as_text=True)
    refresh_token = re.search(r'name="token" value="([^"]+)"', changed_html.split("card__changes", 1)[1]).group(1)
    html = alice.htmx_post(f"/approvals/{approval}/refresh", token=refresh_token).get_data(as_text=True)
    fresh, fresh_token = alice.card(html)
    assert "<dt>Post</dt><dd>Spring meetup (moved)</dd>" in html
    assert row(app, approval).status == Status.CHANGED and row(app, fresh).replaces == approval
    assert "Fresh card" not in html.split(f'id="approval-{fresh}"')[0].split("card__changes")[-1]  # once made, no more
    assert outcome_row("Removed", "done") in alice.answer(fresh, fresh_token).get_data(as_text=True)
    assert handle_calls["n"] == 1
    assert f"delete_post ({row(app, fresh).tool_call_id}): Done." in model_read(model)  # news of the fresh card


def test_a_second_fresh_card_press_makes_nothing(app, alice, posts, model):
    _, approval, token = stale_delete_card(app, alice, posts)
    alice.answer(approval, token)
    assert alice.htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 200
    assert alice.htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 409
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == approval)) == 1


def test_only_a_changed_card_can_be_made_afresh(app, alice, posts, model):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    assert alice.htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 409
    alice.answer(approval, token, "decline")
    assert alice.htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 409


def test_another_person_tenant_or_agent_cannot_ask_a_fresh_card(app, alice, sign_in, posts, model):
    _, approval, token = stale_delete_card(app, alice, posts)
    alice.answer(approval, token)
    assert sign_in("bob@example.com").htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 403
    assert sign_in("carol@example.com").htmx_post(f"/approvals/{approval}/refresh", token=token).status_code == 404
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        agent_token = create_token(user)
    response = app.test_client().post(
        f"/api/approvals/{approval}/refresh", headers=api_headers(agent_token), json={"token": token}
    )
    assert response.status_code == 403
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == approval)) == 0


def test_a_fresh_card_of_a_record_now_gone_is_refused(app, alice, posts, model):
    _, approval, token = stale_delete_card(app, alice, posts)
    alice.answer(approval, token)
    with app.app_context():
        db.session.delete(db.session.get(Post, posts["Spring meetup"]))
        db.session.commit()
    response = alice.htmx_post(f"/approvals/{approval}/refresh", token=token)
    assert response.status_code == 403 and "No fresh card was made" in response.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == approval)) == 0


def test_rows_added_and_removed_are_changes_too(app, alice, model):
    """(The shown card is rewritten here as if the action had built it another way.)"""
    _, approval, token = email_card(alice)
    shown = [{"label": "To", "value": "x"}, {"label": "Cc", "value": "y"}]
    with app.app_context():
        db.session.execute(sa.update(Approval).where(Approval.id == approval).values(rows=shown, digest="0" * 64))
        db.session.commit()
    alice.answer(approval, token)
    assert {"label": "Subject", "before": "", "after": "Hello there"} in row(app, approval).changes
    assert {"label": "To", "before": "x", "after": "dana@example.org"} in row(app, approval).changes
    assert {"label": "Cc", "before": "y", "after": ""} in row(app, approval).changes


def test_no_model_request_or_audit_row_holds_a_value_of_an_edit_on_any_route(app, alice, model):
    _, approval, token = email_card(alice)
    html = edit(alice, approval, token, to="erin@example.net", subject=SECRET_SUBJECT).get_data(as_text=True)
    fresh, fresh_token = alice.card(html)
    alice.htmx_post(f"/approvals/{fresh}/decline", token=fresh_token)
    with app.app_context():
        messages = " ".join(m.text for m in db.session.scalars(sa.select(Message)))
    for place in (model.seen(), audit_text(app), messages):
        assert SECRET_SUBJECT not in place and "erin@example.net" not in place
    assert "The person edited: to, subject." in model.seen()


def test_the_outbox_is_untouched_by_an_edit(app, alice, model):
    _, approval, token = email_card(alice)
    edit(alice, approval, token, subject=SECRET_SUBJECT)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(OutboxEmail)) == 0


# --- declaring `editable` ----------------------------------------------------------------------


def _declare(**attributes):
    """Register one action class made here (a module of its own) and return the error, if any."""
    import types

    from pydantic import BaseModel, Field, SecretStr

    from app.copilot.actions import Action, Kind, Registry, register
    from app.errors import ActionDeclarationError

    class Input(BaseModel):
        to: str = Field(description="Who")
        api_key: SecretStr = Field(description="A key")

    def handle(self, ctx, input):
        return None

    namespace = {"Input": Input, "kind": Kind.EXTERNAL, "toolsets": ("mail",), "reason": "Send?", "handle": handle}
    action = type("SendThing", (Action,), {**namespace, **attributes})
    try:
        register(Registry(), action, types.ModuleType("tests.declared"))
    except ActionDeclarationError as error:
        return str(error)
    return None


def test_editable_fields_must_be_input_fields():
    problem = _declare(editable=("to", "subject"))
    assert "editable names subject, which Input does not have" in problem and "Fix:" in problem


def test_a_secret_field_is_never_editable():
    problem = _declare(editable=("to", "api_key"))
    assert "editable names api_key, a secret" in problem


def test_an_action_without_a_card_has_nothing_to_edit():
    from app.copilot.actions import Kind

    assert "never shows a card" in _declare(editable=("to",), kind=Kind.WRITE)


def test_a_well_declared_editable_action_registers():
    assert _declare(editable=("to",)) is None
    assert "tuple of field names" in _declare(editable="to")


# --- at once -------------------------------------------------------------------------------------


def _at_once(app, url, payload, headers, n=16):
    import threading

    start, statuses, lock = threading.Barrier(n), [], threading.Lock()

    def press():
        own = app.test_client()
        start.wait()
        response = own.post(url, json=payload, headers=headers)
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=press) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(statuses)


def client_headers(app):
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        return api_headers(create_token(user, scope="client"))


def test_simultaneous_edits_make_one_fresh_card(app, model):
    headers = client_headers(app)
    client = app.test_client()
    convo = client.post("/api/conversations", headers=headers).get_json()["id"]
    text = "/send_email to=d@example.org subject=Hi body=Yo"
    card = client.post(f"/api/conversations/{convo}/messages", headers=headers, json={"text": text}).get_json()["pending"][0]
    statuses = _at_once(app, f"/api/approvals/{card['id']}/edit", {"token": card["token"], "values": {"subject": "New"}}, headers)
    assert statuses == [201] + [409] * 15
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == card["id"])) == 1


def test_simultaneous_fresh_card_presses_make_one(app, posts, model):
    headers = client_headers(app)
    client = app.test_client()
    convo = client.post("/api/conversations", headers=headers).get_json()["id"]
    text = f"/delete_post post={posts['Spring meetup']}"
    card = client.post(f"/api/conversations/{convo}/messages", headers=headers, json={"text": text}).get_json()["pending"][0]
    with app.app_context():
        db.session.get(Post, posts["Spring meetup"]).title = "Renamed"
        db.session.commit()
    confirmed = client.post(f"/api/approvals/{card['id']}/confirm", headers=headers, json={"token": card["token"]})
    assert confirmed.get_json()["status"] == Status.CHANGED
    statuses = _at_once(app, f"/api/approvals/{card['id']}/refresh", {"token": card["token"]}, headers)
    assert statuses == [201] + [409] * 15
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.replaces == card["id"])) == 1


def test_markup_in_the_edit_form_and_the_fresh_card_is_text(app, alice, model):
    markup = "<img src=x onerror=alert(1)>"
    _, approval, token = email_card(alice, subject=markup)
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert markup not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    html = edit(alice, approval, token, body=markup).get_data(as_text=True)
    assert markup not in html
