"""DESIGN §6, one behaviour per test, through the JSON API with personal access tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
import time_machine

from app.auth import create_token
from app.extensions import db
from app.models import Approval, AuditEvent, Message, Post, User, utcnow
from tests.conftest import api_headers
from tests.helpers.prompts import prompt_of, shown_in_json


@pytest.fixture
def tokens(app):
    with app.app_context():
        return {u.email.split("@")[0]: create_token(u, scope="client") for u in db.session.scalars(sa.select(User))}


class Api:
    def __init__(self, client, token):
        self.client, self.headers = client, api_headers(token)

    def post(self, url, json=None):
        return self.client.post(url, json=json if json is not None else {}, headers=self.headers)

    def get(self, url):
        return self.client.get(url, headers=self.headers)

    def ask(self, text):
        convo = self.post("/api/conversations").get_json()["id"]
        body = self.post(f"/api/conversations/{convo}/messages", {"text": text}).get_json()
        return convo, body


@pytest.fixture
def api(app, tokens):
    return lambda who: Api(app.test_client(), tokens[who])


def delete_card(api, posts, who="alice", title="Spring meetup"):
    _, body = api(who).ask(f"/delete_post post={posts[title]}")
    (prompt,) = body["pending"]
    return prompt


def post_exists(app, post_id):
    with app.app_context():
        return db.session.get(Post, post_id) is not None


def audit_outcomes(app, approval_id):
    with app.app_context():
        return [
            (e.outcome, e.detail)
            for e in db.session.scalars(
                sa.select(AuditEvent).where(AuditEvent.approval_id == approval_id).order_by(AuditEvent.id)
            )
        ]


def test_prompt_carries_the_actions_words_and_a_token(app, api, posts):
    prompt = delete_card(api, posts)
    shown_in_json(prompt_of(app, prompt["id"], channel="api"), prompt)  # the engine's Prompt, as JSON
    assert prompt["type"] == "confirm" and prompt["action"] == "delete_post"
    assert prompt["reason"] == "Delete this post? This cannot be undone."
    assert prompt["rows"][:3] == [
        {"label": "Post", "value": "Spring meetup"},
        {"label": "Id", "value": f"#{posts['Spring meetup']}"},
        {"label": "Status", "value": "draft"},
    ]
    assert [row["label"] for row in prompt["rows"]] == ["Post", "Id", "Status", "Created"]
    assert prompt["form"] is None and prompt["token"] and prompt["expires_at"]


def test_nothing_runs_before_confirm(app, api, posts, handle_calls):
    delete_card(api, posts)
    assert handle_calls["n"] == 0
    assert post_exists(app, posts["Spring meetup"])


def test_replayed_confirm_is_409_and_runs_once(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    url = f"/api/approvals/{prompt['id']}/confirm"
    first = api("alice").post(url, {"token": prompt["token"]})
    assert first.status_code == 200 and first.get_json()["status"] == "done"
    replay = api("alice").post(url, {"token": prompt["token"]})
    assert replay.status_code == 409
    assert handle_calls["n"] == 1
    assert ("refused_attempt", "already_done") in audit_outcomes(app, prompt["id"])


def test_another_person_gets_403_and_nothing_runs(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    response = api("bob").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.status_code == 403
    assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])
    assert ("refused_attempt", "wrong_person_or_session") in audit_outcomes(app, prompt["id"])


def test_another_tenant_gets_404_and_nothing_runs(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    response = api("carol").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.status_code == 404
    assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])


def test_another_session_of_the_same_person_gets_403(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    with app.app_context():
        second = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), scope="client")
    response = Api(app.test_client(), second).post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.status_code == 403
    assert handle_calls["n"] == 0


def test_forged_token_is_400(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    forged = prompt["token"][:-3] + ("AAA" if not prompt["token"].endswith("AAA") else "BBB")
    response = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": forged})
    assert response.status_code == 400
    assert handle_calls["n"] == 0
    assert ("refused_attempt", "bad_token") in audit_outcomes(app, prompt["id"])


def test_token_of_another_approval_is_400(api, posts, handle_calls):
    first = delete_card(api, posts, title="Spring meetup")
    second = delete_card(api, posts, title="Launch notes")
    response = api("alice").post(f"/api/approvals/{first['id']}/confirm", {"token": second["token"]})
    assert response.status_code == 400
    assert handle_calls["n"] == 0


def test_expired_card_is_410_and_the_model_is_told(app, api, posts, handle_calls):
    start = utcnow()
    with time_machine.travel(start, tick=False) as clock:
        convo, body = api("alice").ask(f"/delete_post post={posts['Spring meetup']}")
        prompt = body["pending"][0]
        clock.shift(timedelta(seconds=app.config["APPROVALS_TTL"] + 1))
        response = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
        assert response.status_code == 410
        assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])
        with app.app_context():
            assert db.session.get(Approval, prompt["id"]).status == "expired"
            said = db.session.scalars(
                sa.select(Message.text).where(Message.conversation_id == convo, Message.role == "assistant")
            ).all()
        assert "The card expired before the person answered. Nothing was done." in said


def test_expired_is_not_declined(app, api, posts):
    start = utcnow()
    with time_machine.travel(start, tick=False) as clock:
        convo, body = api("alice").ask(f"/delete_post post={posts['Spring meetup']}")
        clock.shift(timedelta(seconds=app.config["APPROVALS_TTL"] + 1))
        view = api("alice").get(f"/api/conversations/{convo}").get_json()
    assert view["pending"] == []
    assert view["messages"][-1]["text"] == "The card expired before the person answered. Nothing was done."
    with app.app_context():
        assert db.session.get(Approval, body["pending"][0]["id"]).status == "expired"


def test_a_card_past_its_time_is_listed_expired_without_a_token(app, api, posts):
    """GET /api/approvals marks a card past its time expired before listing (red-team finding: it was
    listed pending, with a freshly signed token)."""
    with time_machine.travel(utcnow(), tick=False) as clock:
        _, body = api("alice").ask(f"/delete_post post={posts['Spring meetup']}")
        clock.shift(timedelta(seconds=app.config["APPROVALS_TTL"] + 1))
        pending = api("alice").get("/api/approvals").get_json()["approvals"]
        expired = api("alice").get("/api/approvals?status=expired").get_json()["approvals"]
    assert pending == []
    assert [(a["id"], a["status"], a["token"]) for a in expired] == [(body["pending"][0]["id"], "expired", None)]


def test_authorize_false_at_confirm_is_refused(app, api, posts, people, handle_calls):
    prompt = delete_card(api, posts)
    with app.app_context():
        db.session.get(Post, posts["Spring meetup"]).author_id = people["bob"]  # no longer hers
        db.session.commit()
    response = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.get_json()["status"] == "refused"
    assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])


def test_card_rebuilt_differs_nothing_runs(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    with app.app_context():
        db.session.get(Post, posts["Spring meetup"]).title = "Spring meetup (final)"
        db.session.commit()
    response = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    body = response.get_json()
    assert body["status"] == "changed"
    assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])
    assert "nothing ran" in body["messages"][-1]["text"]


def test_handle_raising_is_failed_and_the_model_is_told(app, api, posts, monkeypatch):
    from app.actions.delete_post import DeletePost

    def boom(self, ctx, input):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(DeletePost, "handle", boom)
    prompt = delete_card(api, posts)
    body = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]}).get_json()
    assert body["status"] == "failed"
    assert body["messages"][-1]["text"].startswith("Failed: disk on fire")
    with app.app_context():
        assert db.session.get(Approval, prompt["id"]).result == "disk on fire"
    assert post_exists(app, posts["Spring meetup"])


def test_decline_runs_nothing(app, api, posts, handle_calls):
    prompt = delete_card(api, posts)
    body = api("alice").post(f"/api/approvals/{prompt['id']}/decline", {"token": prompt["token"]}).get_json()
    assert body["status"] == "declined"
    assert handle_calls["n"] == 0 and post_exists(app, posts["Spring meetup"])
    confirm_after = api("alice").post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert confirm_after.status_code == 409 and handle_calls["n"] == 0


def test_missing_field_on_destructive_is_refused_naming_it(app, api):
    _, body = api("alice").ask("/delete_post")
    assert body["pending"] == []
    assert body["messages"][-1]["text"] == "Refused: delete_post needs post. Nothing was done."


def test_post_of_another_tenant_gives_no_card(app, api, posts):
    _, body = api("carol").ask(f"/delete_post post={posts['Spring meetup']}")
    assert body["pending"] == []
    assert body["messages"][-1]["text"].startswith("Refused")


def test_own_pending_approvals_are_listed(api, posts):
    prompt = delete_card(api, posts)
    mine = api("alice").get("/api/approvals?status=pending").get_json()["approvals"]
    assert [a["id"] for a in mine] == [prompt["id"]]
    assert api("bob").get("/api/approvals?status=pending").get_json()["approvals"] == []


def test_api_without_credentials_is_401(app):
    assert app.test_client().post("/api/conversations", json={}).status_code == 401
    assert app.test_client().post("/api/conversations", json={}, headers=api_headers("cs_wrong")).status_code == 401


def test_openapi_document_lists_the_endpoints(app):
    doc = app.test_client().get("/api/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    for path in (
        "/api/conversations",
        "/api/conversations/{id}/messages",
        "/api/approvals/{id}/confirm",
        "/api/approvals/{id}/decline",
    ):
        assert path in doc["paths"]
