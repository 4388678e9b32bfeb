"""Sign-in (issue 13, points 9 and 12): `next=` is followed only to a path on this site (and a
revoke goes back only to an admin page of it); an unknown email costs one password hash, like a
known one."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import User
from tests.conftest import Browser, make_approvals


def sign_in_to(app, query, password="demo"):
    """Sign in as alice through the form at /login?<query>; the response (a redirect on success)."""
    return Browser(app, query=query).sign_in("alice@example.com", password)


# --- 9. next= is followed only to a path on this site -------------------------------------------------

OFF_SITE = [
    "/\t/evil.example",
    "/\\evil.example",
    " //evil.example",
    "\t//evil.example",
    "/\n/evil.example",
    "/\r\n/evil.example",
    "\x01//evil.example",
    "//\x7fevil.example",
    "//evil.example",
    "\\\\evil.example",
    "https://evil.example/",
    "http:evil.example",
    "javascript:alert(1)",
    "/ /evil.example",
    "http://localhost@evil.example/",
    "http://[",
    "evil.example",
]


@pytest.mark.parametrize("target", OFF_SITE)
def test_sign_in_never_follows_next_off_site(app, target):
    response = sign_in_to(app, {"next": target})
    assert response.status_code == 302 and response.headers["Location"] == "/"


def test_sign_in_follows_next_encoded_tab_the_way_a_browser_reads_it(app):
    decoded_tab = sign_in_to(app, "next=/%09/evil.example")  # the browser's "/\t/evil.example": off-site
    assert decoded_tab.headers["Location"] == "/"
    literal = sign_in_to(app, "next=/%2509/evil.example")  # "/%09/evil.example": a path here, followed
    assert literal.headers["Location"] == "/%09/evil.example"


def test_sign_in_follows_a_same_site_path_and_the_login_managers_next(app):
    assert sign_in_to(app, {"next": "/c/7?x=1"}).headers["Location"] == "/c/7?x=1"
    asked = app.test_client().get("/c/7")
    assert asked.status_code == 302
    query = asked.headers["Location"].split("?", 1)[1]
    assert sign_in_to(app, query).headers["Location"] == "/c/7"


def test_a_revoke_goes_back_only_to_an_admin_page_of_this_site(app, sign_in):
    admin = sign_in("admin@example.com")
    ids = make_approvals(app, 3)

    def revoke(approval, referrer):
        return admin.client.post(f"/admin/approvals/{approval}/revoke", headers={"X-CSRFToken": admin.csrf, "Referer": referrer})

    assert revoke(ids[0], "https://evil.example/admin/").headers["Location"] == "/admin/"
    assert revoke(ids[1], "http://localhost/admin/?status=pending").headers["Location"] == "/admin/?status=pending"
    assert revoke(ids[2], "http://localhost/c/1?admin").headers["Location"] == "/admin/"


# --- 12. sign-in costs the same for an unknown email -------------------------------------------------


@pytest.mark.production_password_hash
def test_an_unknown_email_costs_one_password_hash_like_a_known_one(app, monkeypatch):
    from app.auth import signin

    real, hashed = signin.check_password_hash, []

    def counted(stored, password):
        hashed.append(stored.split("$")[0])  # the method and its parameters
        return real(stored, password)

    monkeypatch.setattr(signin, "check_password_hash", counted)
    with app.app_context():
        method = db.session.scalar(sa.select(User.password_hash).where(User.email == "alice@example.com")).split("$")[0]
    for email in ("alice@example.com", "nobody@example.com"):
        response = Browser(app).sign_in(email, "wrong")
        assert response.status_code == 200 and "That email and password do not match." in response.get_data(as_text=True)
    assert hashed == [method, method] and method.startswith("scrypt:")
