"""The admin console: tenant-scoped review, revoke, and an audit log that proves itself."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Approval, AuditEvent, Post, Run, User
from tests.conftest import api_headers, make_approvals, outcome_row
from tests.helpers.cards import pending_delete
from tests.helpers.people import globex_admin  # noqa: F401 (a fixture)

ADMIN_PAGES = ["/admin/", "/admin/audit", "/admin/audit.csv"]
ADMIN_API = ["/api/admin/approvals", "/api/admin/audit"]


def test_admin_sees_the_pending_card_with_its_sentence_and_rows(sign_in, alice, posts):
    approval, _ = pending_delete(alice, posts)
    page = sign_in("admin@example.com").client.get("/admin/").get_data(as_text=True)
    row = page[page.index(f'id="row-{approval}"') :]
    assert "alice@example.com" in row[:300]
    assert "Delete this post? This cannot be undone." in row
    assert "<dt>Post</dt><dd>Spring meetup</dd>" in row
    assert ">Revoke</button>" in row


def test_revoke_ends_it_revoked_and_nothing_runs(app, sign_in, alice, posts, handle_calls):
    approval, token = pending_delete(alice, posts)
    admin = sign_in("admin@example.com")
    response = admin.client.post(f"/admin/approvals/{approval}/revoke", headers={"X-CSRFToken": admin.csrf})
    assert response.status_code == 302
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert outcome_row("Revoked", "revoked") in page and 'name="token"' not in page
    assert "Revoked by admin@example.com, " in page
    late = alice.answer(approval, token)
    assert late.status_code == 409 and "Revoked by admin@example.com, " in late.get_data(as_text=True)
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is not None
        convo = db.session.get(Approval, approval).conversation_id
        told = db.session.scalars(sa.select(Run.history).where(Run.conversation_id == convo)).all()
    assert any("An admin revoked this request." in h for h in told)


def test_an_admin_cannot_confirm_someone_elses_card(app, alice, posts, handle_calls):
    approval, token = pending_delete(alice, posts)
    with app.app_context():
        admin_token = create_token(db.session.scalar(sa.select(User).where(User.email == "admin@example.com")), scope="client")
    response = app.test_client().post(
        f"/api/approvals/{approval}/confirm", json={"token": token}, headers=api_headers(admin_token)
    )
    assert response.status_code == 403
    assert handle_calls["n"] == 0


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_a_non_admin_gets_403_on_admin_pages(sign_in, path):
    assert sign_in("bob@example.com").client.get(path).status_code == 403


def test_a_non_admin_gets_403_on_revoke_and_the_admin_api(app, sign_in, alice, posts):
    approval, _ = pending_delete(alice, posts)
    bob = sign_in("bob@example.com")
    assert bob.client.post(f"/admin/approvals/{approval}/revoke", headers={"X-CSRFToken": bob.csrf}).status_code == 403
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "bob@example.com")))
    client = app.test_client()
    for path in ADMIN_API:
        assert client.get(path, headers=api_headers(token)).status_code == 403
    assert client.post(f"/api/admin/approvals/{approval}/revoke", headers=api_headers(token)).status_code == 403
    with app.app_context():
        assert db.session.get(Approval, approval).status == "pending"


def test_another_tenants_admin_sees_nothing_and_gets_404(app, sign_in, alice, posts, globex_admin):
    approval, _ = pending_delete(alice, posts)
    dave = sign_in(globex_admin)
    assert approval not in dave.client.get("/admin/?status=").get_data(as_text=True)
    assert "Spring meetup" not in dave.client.get("/admin/audit").get_data(as_text=True)
    assert dave.client.post(f"/admin/approvals/{approval}/revoke", headers={"X-CSRFToken": dave.csrf}).status_code == 404
    with app.app_context():
        dave_user = db.session.scalar(sa.select(User).where(User.email == globex_admin))
        token, dave_id = create_token(dave_user, scope="client"), dave_user.id
    client = app.test_client()
    assert client.get("/api/admin/approvals?status=", headers=api_headers(token)).get_json()["approvals"] == []
    events = client.get("/api/admin/audit", headers=api_headers(token)).get_json()["events"]
    assert [(e["user_id"], e["detail"]) for e in events] == [(dave_id, "revoke_not_found")]  # only its own attempt
    assert client.post(f"/api/admin/approvals/{approval}/revoke", headers=api_headers(token)).status_code == 404
    with app.app_context():
        assert db.session.get(Approval, approval).status == "pending"


def test_admin_api_lists_and_revokes(app, alice, posts):
    approval, _ = pending_delete(alice, posts)
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "admin@example.com")), scope="client")
    client = app.test_client()
    listed = client.get("/api/admin/approvals", headers=api_headers(token)).get_json()["approvals"]
    assert [a["id"] for a in listed] == [approval]
    assert "arguments" not in listed[0] and "token" not in listed[0]
    revoked = client.post(f"/api/admin/approvals/{approval}/revoke", headers=api_headers(token))
    assert revoked.get_json()["status"] == "revoked"
    again = client.post(f"/api/admin/approvals/{approval}/revoke", headers=api_headers(token))
    assert again.status_code == 409
    audit = client.get("/api/admin/audit?outcome=revoked", headers=api_headers(token)).get_json()
    assert audit["chain"]["ok"] and [e["approval"] for e in audit["events"]] == [approval]


def test_untouched_audit_log_verifies(app, alice, posts):
    approval, token = pending_delete(alice, posts)
    alice.answer(approval, token)
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 0 and "audit chain verifies" in result.output


@pytest.mark.parametrize(
    "column, value", [("detail", "nothing to see"), ("outcome", "declined"), ("user_id", None), ("created_at", "shift")]
)
def test_editing_any_audit_row_breaks_the_chain_at_that_row(app, alice, posts, column, value):
    approval, token = pending_delete(alice, posts)
    alice.answer(approval, token)
    alice.answer(approval, token)  # a refused attempt too
    with app.app_context():
        ids = db.session.scalars(sa.select(AuditEvent.id).order_by(AuditEvent.seq)).all()
        target = ids[len(ids) // 2]
        row = db.session.get(AuditEvent, target)
        new = row.created_at + timedelta(seconds=1) if value == "shift" else value
        db.session.execute(sa.update(AuditEvent).where(AuditEvent.id == target).values({column: new}))
        db.session.commit()
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 1
    assert f"broken at row {target}:" in result.output


def test_removing_an_audit_row_breaks_the_chain(app, alice, posts):
    approval, token = pending_delete(alice, posts)
    alice.answer(approval, token)
    with app.app_context():
        last = db.session.scalar(sa.select(AuditEvent).order_by(AuditEvent.seq.desc()).limit(1))
        db.session.delete(last)
        db.session.commit()
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 1 and "removed" in result.output


def test_audit_page_says_whether_the_chain_verifies(app, sign_in, alice, posts):
    approval, token = pending_delete(alice, posts)
    alice.answer(approval, token, "decline")
    admin = sign_in("admin@example.com")
    assert "The chain verifies" in admin.client.get("/admin/audit").get_data(as_text=True)
    with app.app_context():
        db.session.execute(sa.update(AuditEvent).values(detail="x"))
        db.session.commit()
    assert "The chain is broken at row" in admin.client.get("/admin/audit").get_data(as_text=True)


def test_csv_export_has_every_filtered_row_and_no_formulas(app, sign_in, alice, posts):
    approval, token = pending_delete(alice, posts)
    alice.answer(approval, token, "decline")
    admin = sign_in("admin@example.com")
    body = admin.client.get("/admin/audit.csv?outcome=declined").get_data(as_text=True)
    lines = body.strip().splitlines()
    assert lines[0].startswith("seq,when,person,event,outcome")
    assert len(lines) == 2 and ",declined," in lines[1] and approval in lines[1]


def test_form_decisions_record_field_names_not_values(app, alice):
    html = alice.say(alice.new_conversation(), "/draft_post")
    approval = re.findall(r'id="approval-([0-9a-f]{32})"', html)[-1]
    token = re.findall(r'name="token" value="([^"]+)"', html)[-1]
    alice.htmx_post(f"/approvals/{approval}/submit", token=token, title="T", body="SECRET-CANARY-9", status="draft")
    with app.app_context():
        rows = db.session.scalars(sa.select(AuditEvent).where(AuditEvent.approval_id == approval)).all()
    decided = [r for r in rows if r.event == "approval.decided"]
    assert decided and "The person filled in: title, body, status." in decided[0].detail
    assert not any("SECRET-CANARY-9" in f"{r.detail}{r.outcome}{r.event}" for r in rows)


def test_pages_are_newest_first_and_keyset_paged(app, sign_in):
    make_approvals(app, 120)
    admin = sign_in("admin@example.com")
    seen, after = [], None
    for _ in range(5):  # 120 rows are 3 pages; more means the cursor does not move
        url = "/api/admin/approvals" + (f"?after={after}" if after else "")
        body = admin.client.get(url).get_json()
        seen += [a["id"] for a in body["approvals"]]
        after = body["next"]
        if not after:
            break
    assert seen == [f"a{i:031x}" for i in reversed(range(120))]


def test_filters_by_person_action_and_age(app, sign_in):
    make_approvals(app, 5)
    make_approvals(app, 3, email="bob@example.com", prefix="b")
    admin = sign_in("admin@example.com")
    by_bob = admin.client.get("/api/admin/approvals?person=bob@example.com").get_json()["approvals"]
    assert len(by_bob) == 3 and {a["person"] for a in by_bob} == {"bob@example.com"}
    assert admin.client.get("/api/admin/approvals?action=send_email").get_json()["approvals"] == []
    assert len(admin.client.get("/api/admin/approvals?older_than=60").get_json()["approvals"]) == 0


def test_dashboard_counts_and_draws_the_chart(app, sign_in, alice, posts):
    approval, token = pending_delete(alice, posts, "Spring meetup")
    alice.answer(approval, token)
    pending_delete(alice, posts, "Launch notes")
    page = sign_in("admin@example.com").client.get("/admin/").get_data(as_text=True)
    assert re.search(r'stat__value">1</span><span class="stat__label">pending now', page)
    assert "1 done" in page
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page and "<rect" in page
    assert "<script" not in page.split("</head>")[1]
