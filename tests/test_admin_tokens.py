"""The admin console's tokens (issue 24): an admin makes a token for a person of their tenant (the
secret shown once), lists it and revokes it with a reason (audited); every admin page has every tab,
the audit log names people by email and the chart has a legend."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.copilot import audit
from app.extensions import db
from app.models import ApiToken, AuditEvent, User
from tests.conftest import api_headers
from tests.helpers.people import globex_admin  # noqa: F401 (fixture)

SECRET = re.compile(r"cs_[A-Za-z0-9_-]{20,}")
TABS = ("Approvals", "Audit log", "Tokens", "Channels")


def user_id(app, email):
    with app.app_context():
        return db.session.scalar(sa.select(User.id).where(User.email == email))


def tokens_of(app, email):
    with app.app_context():
        return db.session.scalars(
            sa.select(ApiToken).join(User, ApiToken.user_id == User.id).where(User.email == email).order_by(ApiToken.id)
        ).all()


def create(person, app, email="alice@example.com", **fields):
    data = {"person": user_id(app, email), "name": "laptop", "scope": "client", "csrf_token": person.csrf, **fields}
    return person.client.post("/admin/tokens", data=data)


def revoke(person, token_id, reason="lost laptop"):
    return person.client.post(f"/admin/tokens/{token_id}/revoke", data={"reason": reason, "csrf_token": person.csrf})


def made_token(app, sign_in, **fields):
    """The admin makes one token for alice: (the admin, the secret, the token's id)."""
    admin = sign_in("admin@example.com")
    page = create(admin, app, **fields).get_data(as_text=True)
    return admin, SECRET.search(page).group(0), tokens_of(app, "alice@example.com")[-1].id


def test_admin_creates_a_token_whose_secret_is_shown_once_with_its_scope_and_toolsets(app, sign_in):
    admin = sign_in("admin@example.com")
    response = create(admin, app, toolsets=["blog", "files"])
    page = response.get_data(as_text=True)
    secret = SECRET.search(page).group(0)
    assert response.status_code == 201 and "no-store" in response.headers["Cache-Control"]
    assert "alice@example.com" in page and "client" in page and "blog,files" in page
    (token,) = tokens_of(app, "alice@example.com")
    assert (token.scope, token.toolsets, token.name) == ("client", "blog,files", "laptop")
    assert secret not in admin.client.get("/admin/tokens").get_data(as_text=True)
    assert not SECRET.search(admin.client.get("/admin/tokens").get_data(as_text=True))


def test_the_token_made_in_the_console_works_on_the_api_as_its_person(app, sign_in):
    _, secret, _ = made_token(app, sign_in)
    response = app.test_client().post("/api/conversations", headers=api_headers(secret))
    assert response.status_code == 201


def test_the_made_token_is_listed_with_its_person_scope_and_toolsets(app, sign_in):
    admin, _, token_id = made_token(app, sign_in, scope="agent", toolsets=["blog"])
    page = admin.client.get("/admin/tokens").get_data(as_text=True)
    row = re.search(rf'<tr id="token-{token_id}">(.*?)</tr>', page, re.S).group(1)
    assert all(word in row for word in ("alice@example.com", "laptop", "agent", "blog", "active"))


def test_the_token_creation_is_audited_with_who_made_it(app, sign_in):
    _, _, token_id = made_token(app, sign_in)
    with app.app_context():
        row = db.session.scalar(sa.select(AuditEvent).where(AuditEvent.event == "token.created"))
        admin_id = db.session.scalar(sa.select(User.id).where(User.email == "admin@example.com"))
    assert row.user_id == admin_id and f"token {token_id}" in row.detail and "alice@example.com" in row.detail


def test_a_toolset_that_does_not_exist_makes_no_token(app, sign_in):
    admin = sign_in("admin@example.com")
    response = create(admin, app, toolsets=["nuclear"])
    assert response.status_code == 400 and "nuclear" in response.get_data(as_text=True)
    assert tokens_of(app, "alice@example.com") == []


def test_revoke_asks_for_a_confirmation_and_changes_nothing_on_get(app, sign_in):
    admin, secret, token_id = made_token(app, sign_in)
    page = admin.client.get(f"/admin/tokens/{token_id}/revoke").get_data(as_text=True)
    assert 'name="reason"' in page and "alice@example.com" in page and 'method="post"' in page
    assert not tokens_of(app, "alice@example.com")[0].revoked
    assert app.test_client().post("/api/conversations", headers=api_headers(secret)).status_code == 201


def test_revoke_needs_a_reason(app, sign_in):
    admin, _, token_id = made_token(app, sign_in)
    response = revoke(admin, token_id, reason="  ")
    assert response.status_code == 400 and "reason" in response.get_data(as_text=True).lower()
    assert not tokens_of(app, "alice@example.com")[0].revoked


def test_revoke_with_a_reason_stops_the_token_and_audits_the_reason(app, sign_in):
    admin, secret, token_id = made_token(app, sign_in)
    assert revoke(admin, token_id, "laptop stolen on the train").status_code == 302
    assert app.test_client().post("/api/conversations", headers=api_headers(secret)).status_code == 401
    with app.app_context():
        row = db.session.scalar(sa.select(AuditEvent).where(AuditEvent.event == "token.revoked"))
    assert f"token {token_id}" in row.detail and "laptop stolen on the train" in row.detail
    assert "revoked" in admin.client.get("/admin/tokens").get_data(as_text=True)


def test_another_tenants_admin_neither_sees_nor_revokes_the_token(app, sign_in, globex_admin):  # noqa: F811
    _, secret, token_id = made_token(app, sign_in)
    dave = sign_in(globex_admin)
    assert "alice@example.com" not in dave.client.get("/admin/tokens").get_data(as_text=True)
    assert dave.client.get(f"/admin/tokens/{token_id}/revoke").status_code == 404
    assert revoke(dave, token_id).status_code == 404
    assert not tokens_of(app, "alice@example.com")[0].revoked
    assert app.test_client().post("/api/conversations", headers=api_headers(secret)).status_code == 201


def test_an_admin_cannot_make_a_token_for_another_tenants_person(app, sign_in):
    admin = sign_in("admin@example.com")
    page = admin.client.get("/admin/tokens").get_data(as_text=True)
    assert "carol@example.com" not in page
    assert create(admin, app, email="carol@example.com").status_code == 404
    assert tokens_of(app, "carol@example.com") == []


def test_a_non_admin_cannot_reach_the_token_routes(app, sign_in):
    _, _, token_id = made_token(app, sign_in)
    bob = sign_in("bob@example.com")
    assert bob.client.get("/admin/tokens").status_code == 403
    assert bob.client.get(f"/admin/tokens/{token_id}/revoke").status_code == 403
    assert create(bob, app, email="bob@example.com").status_code == 403
    assert revoke(bob, token_id).status_code == 403
    assert tokens_of(app, "bob@example.com") == [] and not tokens_of(app, "alice@example.com")[0].revoked


def test_an_admins_agent_token_cannot_reach_the_token_routes(app, sign_in):
    _, secret, token_id = made_token(app, sign_in)
    from app.auth import create_token

    with app.app_context():
        agent = create_token(db.session.scalar(sa.select(User).where(User.email == "admin@example.com")), scope="agent")
    client = app.test_client()
    alice_id = user_id(app, "alice@example.com")
    assert client.get("/admin/tokens", headers=api_headers(agent)).status_code in (302, 401, 403)
    made = client.post("/admin/tokens", data={"person": alice_id, "scope": "client"}, headers=api_headers(agent))
    gone = client.post(f"/admin/tokens/{token_id}/revoke", data={"reason": "x"}, headers=api_headers(agent))
    assert made.status_code != 201 and gone.status_code in (302, 400, 401, 403) and len(tokens_of(app, "alice@example.com")) == 1
    assert not tokens_of(app, "alice@example.com")[0].revoked and "login" in gone.headers.get("Location", "login")


def test_token_posts_without_csrf_change_nothing(app, sign_in):
    admin, _, token_id = made_token(app, sign_in)
    alice_id = user_id(app, "alice@example.com")
    assert admin.client.post("/admin/tokens", data={"person": alice_id, "scope": "client"}).status_code == 400
    assert admin.client.post(f"/admin/tokens/{token_id}/revoke", data={"reason": "x"}).status_code == 400
    assert len(tokens_of(app, "alice@example.com")) == 1 and not tokens_of(app, "alice@example.com")[0].revoked


@pytest.mark.parametrize("path", ["/admin/", "/admin/audit", "/admin/tokens", "/admin/channels", "revoke", "created"])
def test_every_admin_page_shows_every_tab(app, sign_in, path):
    admin, _, token_id = made_token(app, sign_in)
    if path == "created":
        page = create(admin, app).get_data(as_text=True)
    else:
        page = admin.client.get(f"/admin/tokens/{token_id}/revoke" if path == "revoke" else path).get_data(as_text=True)
    nav = re.search(r'<nav class="tabs" aria-label="Admin">(.*?)</nav>', page, re.S).group(1)
    assert [re.sub(r"<[^>]+>", "", a).strip() for a in re.findall(r"<a [^>]*>.*?</a>", nav, re.S)] == list(TABS)


def test_the_audit_log_names_people_by_email(app, sign_in):
    alice, admin = user_id(app, "alice@example.com"), user_id(app, "admin@example.com")
    with app.app_context():
        tenant = db.session.get(User, alice).tenant_id
        detail = f"delete_post confirmed by user {alice}, countersigned by user {admin}"
        audit.record("approval.decided", "done", tenant_id=tenant, user_id=admin, detail=detail, channel="web")
        db.session.commit()
    page = sign_in("admin@example.com").client.get("/admin/audit").get_data(as_text=True)
    assert "confirmed by alice@example.com, countersigned by admin@example.com" in page
    assert not re.search(r"\buser \d+\b", page)


def test_the_chart_has_a_legend_naming_each_outcome_it_draws(app, sign_in, alice, posts):
    approval, token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    alice.answer(approval, token, "decline")
    approval, token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Launch notes']}"))
    alice.answer(approval, token)
    page = sign_in("admin@example.com").client.get("/admin/").get_data(as_text=True)
    legend = re.search(r'<ul class="chart__legend"[^>]*>(.*?)</ul>', page, re.S).group(1)
    items = re.findall(r'<li><svg [^>]*><rect [^>]*fill="(#[0-9a-f]{6})"/></svg>\s*([a-z]+)</li>', legend)
    assert items == [("#5d6675", "declined"), ("#1f7a4d", "done")]


def admin_api(app, scope="client"):
    """A test client and the headers of a token of admin@example.com with this scope."""
    from app.auth import create_token

    with app.app_context():
        secret = create_token(db.session.scalar(sa.select(User).where(User.email == "admin@example.com")), scope=scope)
    return app.test_client(), api_headers(secret)


def test_the_api_makes_lists_and_revokes_a_token_with_a_reason(app):
    client, headers = admin_api(app)
    wanted = {"person": "alice@example.com", "scope": "client", "toolsets": ["blog"]}
    made = client.post("/api/admin/tokens", json=wanted, headers=headers)
    assert made.status_code == 201 and made.headers["Cache-Control"] == "no-store"
    body = made.get_json()
    assert (body["person"], body["scope"], body["toolsets"]) == ("alice@example.com", "client", ["blog"])
    assert client.post("/api/conversations", headers=api_headers(body["token"])).status_code == 201
    listed = client.get("/api/admin/tokens", headers=headers).get_json()["tokens"]
    assert body["id"] in [t["id"] for t in listed] and "token" not in listed[0]
    revoke = f"/api/admin/tokens/{body['id']}/revoke"
    assert client.post(revoke, json={}, headers=headers).status_code == 400
    assert client.post(revoke, json={"reason": "left the team"}, headers=headers).get_json()["revoked"] is True
    assert client.post(revoke, json={"reason": "again"}, headers=headers).status_code == 409
    assert client.post("/api/conversations", headers=api_headers(body["token"])).status_code == 401


def test_the_api_refuses_an_agent_token_and_another_tenants_people_and_tokens(app, sign_in):
    _, _, alice_token = made_token(app, sign_in)
    client, agent = admin_api(app, scope="agent")
    assert client.get("/api/admin/tokens", headers=agent).status_code == 403
    assert client.post("/api/admin/tokens", json={"person": "alice@example.com"}, headers=agent).status_code == 403
    assert client.post(f"/api/admin/tokens/{alice_token}/revoke", json={"reason": "x"}, headers=agent).status_code == 403
    _, own = admin_api(app)
    assert client.post("/api/admin/tokens", json={"person": "carol@example.com"}, headers=own).status_code == 404
    assert tokens_of(app, "carol@example.com") == [] and not tokens_of(app, "alice@example.com")[0].revoked


def test_the_api_lists_no_token_of_another_tenant(app, sign_in, globex_admin):  # noqa: F811
    made_token(app, sign_in)
    from app.auth import create_token

    with app.app_context():
        dave = create_token(db.session.scalar(sa.select(User).where(User.email == globex_admin)), scope="client")
    listed = app.test_client().get("/api/admin/tokens", headers=api_headers(dave)).get_json()["tokens"]
    assert listed and {t["person"] for t in listed} == {globex_admin}  # its own, never alice's
