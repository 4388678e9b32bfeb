"""Who may confirm (issue 13, points 1, 2 and 5): an agent-scoped token never answers a card or a
form nor sees a card's token; a token's toolsets bound every route; signing out ends the session
server-side; a revoked token stops at once. Attacks through the JSON API, the browser and the CLI
(the MCP ones are in tests/test_mcp.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.copilot.kit import text, tool_call
from app.extensions import db
from app.models import ApiToken, Approval, AuditEvent, Conversation, OutboxEmail, Post, Run, User, UserSession
from tests.conftest import api_headers

AGENT_MESSAGE = "This credential acts for an agent; only the person can answer a card — open it in Countersign."
EMAIL = '/send_email to=eve@example.net subject="Hi" body="Hello"'


def user(email: str) -> User:
    return db.session.scalar(sa.select(User).where(User.email == email))


@pytest.fixture
def token_of(app):
    """make(email, **create_token kwargs) -> (token, token id)."""

    def make(email: str = "alice@example.com", **kwargs) -> tuple[str, int]:
        with app.app_context():
            token = create_token(user(email), **kwargs)
            return token, db.session.scalar(sa.select(sa.func.max(ApiToken.id)))

    return make


class Api:
    def __init__(self, app, token):
        self.client, self.headers = app.test_client(), api_headers(token)

    def post(self, url, json=None):
        return self.client.post(url, json=json if json is not None else {}, headers=self.headers)

    def get(self, url):
        return self.client.get(url, headers=self.headers)

    def say(self, words, conversation=None):
        conversation = conversation or self.post("/api/conversations").get_json()["id"]
        response = self.post(f"/api/conversations/{conversation}/messages", {"text": words})
        assert response.status_code == 200, response.get_data(as_text=True)
        return conversation, response.get_json()


def sign_for(app, approval_id: str, binding: str) -> str:
    """A correctly signed card token, as an attacker who learnt the binding would mint it."""
    from app.copilot.approvals import sign

    with app.test_request_context():
        return sign(db.session.get(Approval, approval_id), binding)


def status_of(app, approval_id: str) -> str:
    with app.app_context():
        return db.session.get(Approval, approval_id).status


def refused_attempts(app, approval_id: str) -> list[str]:
    with app.app_context():
        return list(
            db.session.scalars(
                sa.select(AuditEvent.detail).where(AuditEvent.approval_id == approval_id, AuditEvent.outcome == "refused_attempt")
            )
        )


# --- 1. an agent token never answers and never sees a card's token ---------------------------------


def test_an_agent_token_lists_pending_cards_but_sees_no_token(app, alice, token_of, posts):
    alice.say(alice.new_conversation(), f"/delete_post post={posts['Launch notes']}")  # a browser card
    agent = Api(app, token_of()[0])
    conversation, said = agent.say(f"/delete_post post={posts['Spring meetup']}")
    assert [p["token"] for p in said["pending"]] == [None]
    assert [p["token"] for p in agent.get(f"/api/conversations/{conversation}").get_json()["pending"]] == [None]
    listed = agent.get("/api/approvals?status=pending").get_json()["approvals"]
    assert len(listed) == 2 and {p["action"] for p in listed} == {"delete_post"}
    assert [p["token"] for p in listed] == [None, None]


@pytest.mark.parametrize("decision", ["confirm", "decline"])
def test_an_agent_token_cannot_answer_a_card_even_with_a_token_signed_for_it(app, token_of, posts, handle_calls, decision):
    token, token_id = token_of()
    agent = Api(app, token)
    _, said = agent.say(f"/delete_post post={posts['Spring meetup']}")
    approval = said["pending"][0]["id"]
    stolen = sign_for(app, approval, f"pat:{token_id}")
    response = agent.post(f"/api/approvals/{approval}/{decision}", {"token": stolen})
    assert response.status_code == 403 and response.get_json()["message"] == AGENT_MESSAGE
    assert handle_calls["n"] == 0 and status_of(app, approval) == "pending"
    assert refused_attempts(app, approval) == ["agent_credential"]


@pytest.mark.parametrize("decision", ["submit", "cancel"])
def test_an_agent_token_cannot_answer_a_form(app, token_of, decision):
    token, token_id = token_of()
    agent = Api(app, token)
    _, said = agent.say('/draft_post title="By the agent"')
    (form,) = said["pending"]
    assert form["type"] == "form" and form["token"] is None
    stolen = sign_for(app, form["id"], f"pat:{token_id}")
    response = agent.post(
        f"/api/approvals/{form['id']}/{decision}",
        {"token": stolen, "values": {"body": "the agent's words", "status": "published"}},
    )
    assert response.status_code == 403 and response.get_json()["message"] == AGENT_MESSAGE
    assert status_of(app, form["id"]) == "pending"
    with app.app_context():
        assert db.session.scalar(sa.select(Post).where(Post.title == "By the agent")) is None


def test_an_agent_token_cannot_use_a_browser_cards_token(app, alice, token_of, posts, handle_calls):
    approval, browser_token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    response = Api(app, token_of()[0]).post(f"/api/approvals/{approval}/confirm", {"token": browser_token})
    assert response.status_code == 403 and response.get_json()["message"] == AGENT_MESSAGE
    assert handle_calls["n"] == 0 and status_of(app, approval) == "pending"
    assert alice.answer(approval, browser_token).status_code == 200 and handle_calls["n"] == 1  # the person can


def test_an_admins_agent_token_cannot_revoke(app, alice, token_of, posts):
    approval, _ = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    response = Api(app, token_of("admin@example.com")[0]).post(f"/api/admin/approvals/{approval}/revoke")
    assert response.status_code == 403 and response.get_json()["message"] == AGENT_MESSAGE
    assert status_of(app, approval) == "pending"


def test_a_client_token_still_confirms_its_own_card(app, token_of, posts, handle_calls):
    own = Api(app, token_of(scope="client")[0])
    _, said = own.say(f"/delete_post post={posts['Spring meetup']}")
    prompt = said["pending"][0]
    response = own.post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.status_code == 200 and response.get_json()["status"] == "done"
    assert handle_calls["n"] == 1


def test_a_card_an_agent_asked_for_is_answered_by_the_person_and_says_who_asked(app, sign_in, token_of, posts, handle_calls):
    token, token_id = token_of(name="laptop")
    _, said = Api(app, token).say(f"/delete_post post={posts['Spring meetup']}")
    approval = said["pending"][0]["id"]
    with app.app_context():
        row = db.session.get(Approval, approval)
        assert (row.requested_via, row.requested_by_agent) == (f"api:pat:{token_id}", True)
    alice = sign_in("alice@example.com")
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert "Asked by an agent (token &#39;laptop&#39;) through the API." in page
    assert alice.answer(*alice.card(page)).status_code == 200 and handle_calls["n"] == 1


def test_a_client_token_may_answer_a_card_an_agent_asked_for(app, token_of, posts, handle_calls):
    _, said = Api(app, token_of()[0]).say(f"/delete_post post={posts['Spring meetup']}")
    own = Api(app, token_of(scope="client")[0])
    (prompt,) = own.get("/api/approvals?status=pending").get_json()["approvals"]
    assert prompt["id"] == said["pending"][0]["id"] and prompt["token"]
    assert own.post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]}).status_code == 200
    assert handle_calls["n"] == 1


# --- 2. a token's toolsets bound every route ------------------------------------------------------


def tool_names(info) -> set[str]:
    return {t.name for t in info.function_tools}


def test_a_blog_only_tokens_chat_is_offered_no_mail_or_files_tool(app, token_of, model):
    agent = Api(app, token_of(toolsets="blog")[0])
    _, said = agent.say(EMAIL)
    offered = tool_names(model.infos[-1])
    assert "delete_post" in offered and not offered & {"send_email", "manage_files"}
    assert said["pending"] == [] and "I have no action called /send_email" in said["messages"][-1]["text"]
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_a_blog_only_tokens_forced_call_to_send_email_is_refused(app, token_of, model):
    model.enqueue(
        tool_call("send_email", to="eve@example.net", subject="Hi", body="Hello"),
        tool_call("manage_files", operation="delete", path="reports/old.csv"),
    )
    model.enqueue(text("I tried."))
    _, said = Api(app, token_of(toolsets="blog")[0]).say("mail eve and clean up")
    assert said["pending"] == []
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
        assert db.session.scalar(sa.select(sa.func.count()).select_from(OutboxEmail)) == 0


def test_call_action_refuses_an_action_outside_the_runs_toolsets(app):
    """The second lock: even if a tool outside the toolsets reached the loop, call_action says no."""
    from app.copilot.turns import _agent as agent

    with app.test_request_context():
        alice = user("alice@example.com")
        conversation = Conversation(tenant_id=alice.tenant_id, user_id=alice.id)
        db.session.add(conversation)
        db.session.flush()
        run = Run(conversation_id=conversation.id, status="running", toolsets="blog")
        db.session.add(run)
        db.session.flush()
        eng = agent.engine()
        turn = agent.Turn(
            ctx=agent.context_for(alice, "api"), run=run, registry=eng.registry, step=1, allowed=eng.reachable(("blog",))
        )
        said = agent.call_action(
            turn, eng.registry.get("send_email"), {"to": "eve@example.net", "subject": "Hi", "body": "Hello"}, "call_1"
        )
        assert said == "Refused: send_email is not in this credential's toolsets. Nothing was shown or done."
        assert turn.created == [] and db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_a_run_resumed_by_the_persons_confirm_keeps_the_tokens_toolsets(app, sign_in, token_of, posts, model, handle_calls):
    token, token_id = token_of(toolsets="blog")
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]))
    _, said = Api(app, token).say("delete the meetup")
    approval = said["pending"][0]["id"]
    model.enqueue(tool_call("send_email", to="eve@example.net", subject="Done", body="Deleted"))
    model.enqueue(text("Deleted."))
    alice = sign_in("alice@example.com")
    assert alice.answer(*alice.card(alice.client.get(f"/approvals/{approval}").get_data(as_text=True))).status_code == 200
    assert handle_calls["n"] == 1
    assert "send_email" not in tool_names(model.infos[-1])
    with app.app_context():
        assert [a.action for a in db.session.scalars(sa.select(Approval))] == ["delete_post"]
        assert {(r.via, r.agent, r.toolsets) for r in db.session.scalars(sa.select(Run))} == {
            (f"api:pat:{token_id}", True, "blog")
        }


def test_the_person_writing_in_an_agents_conversation_stays_within_its_toolsets(app, alice, token_of, model):
    conversation, _ = Api(app, token_of(toolsets="blog")[0]).say("hello")
    alice.say(conversation, EMAIL)
    assert "send_email" not in tool_names(model.infos[-1])
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
    own = alice.say(alice.new_conversation(), EMAIL)  # a conversation of the person's own: everything
    assert "send_email" in tool_names(model.infos[-1]) and "Needs your confirmation" in own


def test_a_retry_in_the_browser_stays_within_the_agents_toolsets(app, alice, token_of, model, monkeypatch):
    def down(messages, info):
        raise RuntimeError("the model's service is down")

    real = model.function
    monkeypatch.setattr(model, "function", down)
    conversation, said = Api(app, token_of(toolsets="blog")[0]).say(EMAIL)
    assert said["messages"][-1]["role"] == "error"
    monkeypatch.setattr(model, "function", real)
    alice.htmx_post(f"/c/{conversation}/retry")
    assert "send_email" not in tool_names(model.infos[-1])
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


@pytest.mark.parametrize("app_config", [{"COUNTERSIGN_TOOLSETS": ["blog"]}])
def test_a_token_never_reaches_past_the_apps_own_toolsets(app, token_of):
    """A token made for "files" on an app that serves only "blog" reaches no files action, listed or called."""
    from app.copilot.turns import _agent as agent
    from app.mcp import _actor, _tools

    _, token_id = token_of(toolsets="files")
    with app.app_context():
        actor = _actor(token_id)
        assert "manage_files" not in {t.name for t in _tools(token_id).tools}
        said, approval = agent.call_direct(actor, "manage_files", {"operation": "delete", "path": "reports/old.csv"})
        assert (said, approval) == ("Unknown tool 'manage_files'.", None)


def test_a_blog_only_client_token_cannot_answer_a_mail_card(app, alice, token_of, handle_calls):
    approval, _ = alice.card(alice.say(alice.new_conversation(), EMAIL))
    token, token_id = token_of(scope="client", toolsets="blog")
    own = Api(app, token)
    assert [p["token"] for p in own.get("/api/approvals").get_json()["approvals"]] == [None]
    response = own.post(f"/api/approvals/{approval}/confirm", {"token": sign_for(app, approval, f"pat:{token_id}")})
    assert response.status_code == 403 and "toolsets" in response.get_json()["message"]
    assert status_of(app, approval) == "pending"
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(OutboxEmail)) == 0


# --- 5. sign-out ends the session; tokens are listed and revoked -----------------------------------


def copy_of(app, person):
    """Another client holding a copy of the person's session cookie (as a thief would)."""
    thief = app.test_client()
    thief.set_cookie("session", person.client.get_cookie("session").value)
    return thief


def test_a_cookie_copied_before_sign_out_is_refused_everywhere(app, alice, posts, handle_calls):
    conversation = alice.new_conversation()
    approval, card_token = alice.card(alice.say(conversation, f"/delete_post post={posts['Spring meetup']}"))
    thief = copy_of(app, alice)
    csrf = {"X-CSRFToken": alice.csrf, "HX-Request": "true"}
    assert thief.get("/").status_code == 200  # the copy works while the session lives
    assert alice.client.post("/logout", headers={"X-CSRFToken": alice.csrf}).status_code == 302
    for page in ("/", f"/c/{conversation}", f"/approvals/{approval}", "/admin/"):
        response = thief.get(page)
        assert response.status_code == 302 and response.headers["Location"].startswith("/login"), page
    for url, data in (
        (f"/approvals/{approval}/confirm", {"token": card_token}),
        (f"/c/{conversation}/messages", {"text": "hello"}),
        ("/conversations", {}),
    ):
        assert thief.post(url, data=data, headers=csrf).status_code in (302, 401), url
    assert thief.get("/api/approvals").status_code == 401
    assert thief.post("/api/conversations", json={}, headers=csrf).status_code == 401
    assert thief.post(f"/api/approvals/{approval}/confirm", json={"token": card_token}, headers=csrf).status_code == 401
    assert handle_calls["n"] == 0 and status_of(app, approval) == "pending"


def test_signing_in_keeps_a_session_row_and_signing_out_ends_it(app, alice):
    with app.app_context():
        (row,) = db.session.scalars(sa.select(UserSession))
        assert row.ended_at is None
    alice.client.post("/logout", headers={"X-CSRFToken": alice.csrf})
    with app.app_context():
        assert db.session.get(UserSession, row.id).ended_at is not None


def test_a_session_older_than_its_max_age_has_ended(app, alice):
    import time_machine

    from app.models import utcnow

    assert alice.client.get("/").status_code == 200
    with time_machine.travel(utcnow() + timedelta(seconds=app.config["SESSION_MAX_AGE"] - 60), tick=False):
        assert alice.client.get("/").status_code == 200
    with time_machine.travel(utcnow() + timedelta(seconds=app.config["SESSION_MAX_AGE"] + 1), tick=False):
        response = alice.client.get("/")
        assert response.status_code == 302 and response.headers["Location"].startswith("/login")


def test_users_sign_out_ends_every_session_of_the_person(app, sign_in):
    laptop, phone = sign_in("alice@example.com"), sign_in("alice@example.com")
    bob = sign_in("bob@example.com")
    result = app.test_cli_runner().invoke(args=["users", "sign-out", "alice@example.com"])
    assert result.exit_code == 0 and "Ended 2 session(s)." in result.output
    assert laptop.client.get("/").status_code == 302 and phone.client.get("/").status_code == 302
    assert bob.client.get("/").status_code == 200


def test_a_revoked_token_gets_401_and_its_cards_cannot_be_answered_with_it(app, token_of, posts, handle_calls):
    token, token_id = token_of(scope="client")
    own = Api(app, token)
    _, said = own.say(f"/delete_post post={posts['Spring meetup']}")
    prompt = said["pending"][0]
    result = app.test_cli_runner().invoke(args=["users", "revoke-token", str(token_id)])
    assert result.exit_code == 0 and f"Revoked token {token_id}" in result.output
    response = own.post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
    assert response.status_code == 401
    assert own.get("/api/approvals").status_code == 401
    assert handle_calls["n"] == 0 and status_of(app, prompt["id"]) == "pending"
    with app.app_context():
        assert db.session.scalar(sa.select(AuditEvent.event).where(AuditEvent.event == "token.revoked"))


def test_users_tokens_lists_scope_and_toolsets_but_never_the_token(app, token_of):
    agent, agent_id = token_of(name="laptop", toolsets="blog")
    client, client_id = token_of(name="my-app", scope="client")
    app.test_cli_runner().invoke(args=["users", "revoke-token", str(client_id)])
    out = app.test_cli_runner().invoke(args=["users", "tokens", "alice@example.com"]).output
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert lines[str(agent_id)][1:4] == ["laptop", "agent", "blog"] and lines[str(agent_id)][-1] == "no"
    assert lines[str(client_id)][1:3] == ["my-app", "client"] and lines[str(client_id)][-1] == "yes"
    with app.app_context():
        hashes = list(db.session.scalars(sa.select(ApiToken.token_hash)))
    assert agent not in out and client not in out and not any(h in out for h in hashes)


def test_create_token_takes_a_scope_and_refuses_an_unknown_toolset(app):
    runner = app.test_cli_runner()
    made = runner.invoke(args=["users", "create-token", "alice@example.com", "--scope", "client"])
    assert made.exit_code == 0 and made.stdout.startswith("cs_") and "scope: client" in made.stderr
    wrong = runner.invoke(args=["users", "create-token", "alice@example.com", "--toolsets", "blog,payroll"])
    assert wrong.exit_code != 0 and "Unknown toolset payroll" in wrong.output
    assert runner.invoke(args=["users", "create-token", "alice@example.com", "--scope", "god"]).exit_code != 0
    with app.app_context():
        assert [t.scope for t in db.session.scalars(sa.select(ApiToken))] == ["client"]


def test_the_admin_tokens_page_lists_its_tenants_tokens_and_revokes(app, sign_in, token_of):
    alice_token, alice_id = token_of(name="alice-laptop")
    _, carol_id = token_of("carol@example.com", name="carol-laptop")
    admin = sign_in("admin@example.com")
    page = admin.client.get("/admin/tokens").get_data(as_text=True)
    assert "alice-laptop" in page and "carol-laptop" not in page and alice_token not in page
    assert admin.client.post(f"/admin/tokens/{carol_id}/revoke", headers={"X-CSRFToken": admin.csrf}).status_code == 404
    assert admin.client.post(f"/admin/tokens/{alice_id}/revoke").status_code == 400  # no CSRF token
    revoked = admin.client.post(f"/admin/tokens/{alice_id}/revoke", data={"reason": "lost"}, headers={"X-CSRFToken": admin.csrf})
    assert revoked.status_code == 302
    assert Api(app, alice_token).get("/api/approvals").status_code == 401
    with app.app_context():
        assert [t.revoked for t in db.session.scalars(sa.select(ApiToken).order_by(ApiToken.id))] == [True, False]
        event = db.session.scalar(sa.select(AuditEvent).where(AuditEvent.event == "token.revoked"))
        assert event.user_id == user("admin@example.com").id and event.channel == "admin"


def test_a_person_who_is_not_an_admin_cannot_see_or_revoke_tokens(app, sign_in, token_of):
    _, alice_id = token_of()
    bob = sign_in("bob@example.com")
    assert bob.client.get("/admin/tokens").status_code == 403
    assert bob.client.post(f"/admin/tokens/{alice_id}/revoke", headers={"X-CSRFToken": bob.csrf}).status_code == 403
    with app.app_context():
        assert db.session.get(ApiToken, alice_id).revoked is False


def test_the_demo_says_which_scope_to_use_for_what(app):
    out = app.test_cli_runner().invoke(args=["demo"]).output
    assert re.search(r"agent\s+- for an MCP client", out) and "--scope client" in out
