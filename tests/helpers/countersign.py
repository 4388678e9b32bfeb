"""The two-person rule's tests (a folder delete waits for an admin's countersignature): the demo's
folder, the card confirmed by alice, the countersigner's token."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Approval, User
from tests.conftest import TOKEN, api_headers

FOLDER_DELETE = "/manage_files operation=delete_folder path=reports"


@pytest.fixture
def folder(app):
    acme = Path(app.config["FILES_ROOT"], "acme")
    (acme / "reports").mkdir(parents=True, exist_ok=True)
    (acme / "reports" / "old.csv").write_text("a,b\n1,2\n")
    return acme / "reports"


@pytest.fixture
def handled(monkeypatch):
    """Every ManageFiles.handle() run: (operation, the ActionContext's user's email)."""
    from app.actions.manage_files import ManageFiles

    runs: list[tuple[str, str]] = []
    original = ManageFiles.handle

    def counted(self, ctx, input):
        runs.append((input.operation, ctx.user.email))
        return original(self, ctx, input)

    monkeypatch.setattr(ManageFiles, "handle", counted)
    return runs


@pytest.fixture
def admin(sign_in):
    return sign_in("admin@example.com")


def confirmed(alice) -> str:
    """alice asks for the folder delete and confirms it: the card's id (now countersigning)."""
    approval_id, token = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    body = alice.answer(approval_id, token).get_data(as_text=True)
    assert "Confirmed — waiting for a countersignature" in body
    return approval_id


def second_token(person, approval_id: str) -> str:
    page = person.client.get(f"/approvals/{approval_id}")
    assert page.status_code == 200, page.status_code
    html = page.get_data(as_text=True)
    assert f"/approvals/{approval_id}/countersign" in html
    return TOKEN.findall(html)[-1]


def token_for(app, email: str, scope: str) -> dict[str, str]:
    with app.app_context():
        return api_headers(create_token(db.session.scalar(sa.select(User).where(User.email == email)), scope=scope))


def card_for(app, email: str, path: str = "reports", confirm: bool = False) -> str:
    """A folder-delete card of this person's, straight through the engine (as the web would)."""
    from app import copilot
    from app.copilot.approvals import Actor, sign
    from app.models import Conversation

    with app.app_context():
        person = db.session.scalar(sa.select(User).where(User.email == email))
        conversation = Conversation(tenant_id=person.tenant_id, user_id=person.id)
        db.session.add(conversation)
        db.session.commit()
        actor = Actor(user=person, binding="web:test", channel="web")
        copilot.send_message(conversation, actor, f"/manage_files operation=delete_folder path={path}")
        approval = db.session.scalar(sa.select(Approval).where(Approval.conversation_id == conversation.id))
        assert approval is not None and approval.status == "pending"
        if confirm:
            copilot.answer(approval.id, sign(approval, actor.binding), actor, "confirm")
        return approval.id


def both_signatures(alice, admin, html: str) -> str:
    """A folder delete needs an admin's countersignature (the demo's two-person rule): alice
    confirms, the admin countersigns on the card's page; the card as the admin's answer shows it."""
    approval_id, token = alice.card(html)
    assert "waiting for a countersignature" in alice.answer(approval_id, token).get_data(as_text=True)
    second = TOKEN.findall(admin.client.get(f"/approvals/{approval_id}").get_data(as_text=True))[-1]
    return admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second).get_data(as_text=True)
