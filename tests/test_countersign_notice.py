"""The two-person rule's notice and its other channels: the allowed countersigners are mailed a
link when SMTP_URL is set; an MCP client gives neither signature."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import ApiToken, Approval, User
from tests.helpers.countersign import FOLDER_DELETE, card_for, confirmed, handled  # noqa: F401


@pytest.fixture
def app_config(smtp):
    return {"SMTP_URL": smtp.url, "PUBLIC_URL": "https://countersign.example"}


@pytest.fixture
def folder(app):
    reports = Path(app.config["FILES_ROOT"], "acme", "reports")
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "old.csv").write_text("a,b\n1,2\n")
    return reports


def test_the_admins_are_mailed_a_link_once_the_person_confirms(app, alice, folder, smtp):
    smtp.inbox.messages.clear()
    approval_id, token = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    assert smtp.inbox.messages == []  # nothing before the first signature
    alice.answer(approval_id, token)
    (notice,) = smtp.inbox.messages  # admin@example.com only: never alice, never bob
    assert notice["To"] == "admin@example.com" and notice["Subject"] == "Waiting for your countersignature"
    text = notice.get_payload(decode=True).decode()
    assert f"https://countersign.example/approvals/{approval_id}" in text
    assert "Delete the folder reports and everything in it on disk local?" in text and "Files inside: 1" in text
    assert "delete_folder" not in text and "operation" not in text  # the card's words, never the arguments


def test_a_card_without_the_rule_mails_nobody(app, alice, folder, smtp):
    smtp.inbox.messages.clear()
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=reports/old.csv")
    alice.answer(*alice.card(html))
    assert smtp.inbox.messages == []


def _mcp_token(app, email: str, scope: str) -> int:
    with app.app_context():
        person = db.session.scalar(sa.select(User).where(User.email == email))
        create_token(person, scope=scope)
        return db.session.scalar(sa.select(sa.func.max(ApiToken.id)).where(ApiToken.user_id == person.id))


def test_mcp_keeps_waiting_after_the_first_signature_and_signs_nothing(app, folder, handled):  # noqa: F811
    import mcp_types as types

    from app.mcp import _answer

    approval_id = card_for(app, "alice@example.com", confirm=True)
    alice_token = _mcp_token(app, "alice@example.com", "client")
    admin_token = _mcp_token(app, "admin@example.com", "client")
    with app.app_context():
        assert isinstance(_answer(alice_token, approval_id, None), types.InputRequiredResult)
        accepted = _answer(alice_token, approval_id, types.ElicitResult(action="accept"))
        assert isinstance(accepted, types.InputRequiredResult)  # "I opened the link" is no signature
        by_admin = _answer(admin_token, approval_id, types.ElicitResult(action="accept"))
        assert not isinstance(by_admin, types.InputRequiredResult)  # not the admin's request state
        assert db.session.get(Approval, approval_id).status == "countersigning"
    assert handled == [] and folder.exists()
