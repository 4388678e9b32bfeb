"""People link their own chat accounts and addresses (issue 28 §1): a one-time code from the
settings page, carried to Telegram or Slack and confirmed back on the page, or a link mailed to an
address; single-use, short-lived, bound to the person, audited; unlink, and an admin's Remove."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.auth import links
from app.extensions import db
from app.models import AuditEvent, ConnectorIdentity, Conversation, LinkCode, User, utcnow
from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.links import slack_says, telegram_says
from tests.helpers.people import globex_admin  # noqa: F401  (a fixture)

services, app_config, _chat = chat_fixtures()
CODE = re.compile(r"(?:/start|link) (cs-[0-9a-f]{20})")


@pytest.fixture
def telegram(app, services):
    """The fake Telegram (alice, bob and carol linked as the other connector tests have them)."""
    return Chat(app, "telegram", services)


def new_code(person, connector="telegram"):
    page = person.client.post(f"/settings/channels/{connector}", headers={"X-CSRFToken": person.csrf})
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    return CODE.search(page.get_data(as_text=True)).group(1)


def linked(app, connector, external_id):
    with app.app_context():
        row = db.session.scalar(
            sa.select(ConnectorIdentity).where(
                ConnectorIdentity.connector == connector, ConnectorIdentity.external_id == external_id
            )
        )
        return row.user.email if row else None


def claim_id(person):
    page = person.client.get("/settings/channels").get_data(as_text=True)
    found = re.search(r"/settings/channels/claims/(\d+)/link", page)
    return found and int(found.group(1))


def audit_of(app, event):
    with app.app_context():
        return [(r.outcome, r.channel) for r in db.session.scalars(sa.select(AuditEvent).where(AuditEvent.event == event))]


def test_a_telegram_code_claimed_then_confirmed_links_the_account(app, alice, telegram):
    code = new_code(alice)
    assert telegram_says(app, telegram, "444", f"/start {code}", name="Alice A") == links.CLAIMED
    assert linked(app, "telegram", "444") is None  # nothing is linked before she says it is hers
    page = alice.client.get("/settings/channels").get_data(as_text=True)
    assert "Alice A" in page and "telegram id 444" in page
    response = alice.client.post(f"/settings/channels/claims/{claim_id(alice)}/link", headers={"X-CSRFToken": alice.csrf})
    assert response.status_code == 302
    assert linked(app, "telegram", "444") == "alice@example.com"
    # Her account now speaks as her: a message there is a turn of her own conversation.
    telegram_says(app, telegram, "444", "hello from my phone")
    with app.app_context():
        mine = db.session.scalars(sa.select(Conversation.title).join(User).where(User.email == "alice@example.com"))
        assert "telegram: hello from my phone" in list(mine)
    assert ("issued", "telegram") in audit_of(app, "channel.link_code")
    assert ("claimed", "telegram") in audit_of(app, "channel.link_claim")
    assert ("linked", "telegram") in audit_of(app, "channel.linked")


def test_a_code_acts_once(app, alice, telegram):
    code = new_code(alice)
    assert telegram_says(app, telegram, "444", f"/start {code}") == links.CLAIMED
    assert telegram_says(app, telegram, "555", f"/start {code}") == links.NOT_VALID  # a second account: nothing
    ident = claim_id(alice)
    assert alice.client.post(f"/settings/channels/claims/{ident}/link", headers={"X-CSRFToken": alice.csrf}).status_code == 302
    again = alice.client.post(f"/settings/channels/claims/{ident}/link", headers={"X-CSRFToken": alice.csrf})
    assert again.status_code == 410  # spent: used already
    assert linked(app, "telegram", "555") is None
    assert ("refused", "telegram") in audit_of(app, "channel.link_claim")


def test_a_code_runs_out(app, alice, telegram):
    code = new_code(alice)
    with app.app_context():
        db.session.execute(sa.update(LinkCode).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert telegram_says(app, telegram, "444", f"/start {code}") == links.NOT_VALID
    assert linked(app, "telegram", "444") is None


def test_a_newer_code_replaces_the_older_one(app, alice, telegram):
    old = new_code(alice)
    new_code(alice)
    assert telegram_says(app, telegram, "444", f"/start {old}") == links.NOT_VALID


def test_a_code_sent_by_someone_elses_account_links_nothing(app, alice, telegram):
    """Bob's linked Telegram sends alice's code (seen over her shoulder): refused, and spent."""
    code = new_code(alice)
    assert telegram_says(app, telegram, "222", f"/start {code}") == links.TAKEN
    assert linked(app, "telegram", "222") == "bob@example.com"
    assert claim_id(alice) is None


def test_a_stranger_who_sends_her_code_is_turned_away_by_her(app, alice, telegram):
    """An unknown account sends her code first: she sees its name and says it is not hers."""
    code = new_code(alice)
    telegram_says(app, telegram, "666", f"/start {code}", name="Mallory")
    assert "Mallory" in alice.client.get("/settings/channels").get_data(as_text=True)
    ident = claim_id(alice)
    assert alice.client.post(f"/settings/channels/claims/{ident}/reject", headers={"X-CSRFToken": alice.csrf}).status_code == 302
    assert linked(app, "telegram", "666") is None
    assert ("rejected", "telegram") in audit_of(app, "channel.link_claim")


def test_only_the_codes_person_answers_its_claim(app, alice, sign_in, telegram):
    code = new_code(alice)
    telegram_says(app, telegram, "444", f"/start {code}")
    bob = sign_in("bob@example.com")
    ident = claim_id(alice)
    assert bob.client.post(f"/settings/channels/claims/{ident}/link", headers={"X-CSRFToken": bob.csrf}).status_code == 404
    assert linked(app, "telegram", "444") is None


def test_a_slack_dm_of_the_code_links_the_slack_account(app, alice, services):
    chat = Chat(app, "slack", services)
    code = new_code(alice, "slack")
    assert slack_says(app, chat, "U444", f"link {code}") == links.CLAIMED
    alice.client.post(f"/settings/channels/claims/{claim_id(alice)}/link", headers={"X-CSRFToken": alice.csrf})
    assert linked(app, "slack", "U444") == "alice@example.com"


def test_a_telegram_code_links_nothing_on_slack(app, alice, services):
    chat = Chat(app, "slack", services)
    code = new_code(alice, "telegram")
    assert slack_says(app, chat, "U444", f"link {code}") == links.NOT_VALID


def test_a_mailed_link_links_the_address_for_its_person_only(app, alice, sign_in, services):
    smtp = services[1]
    smtp.inbox.messages.clear()
    response = alice.client.post(
        "/settings/channels/email", data={"address": "Alice.Home@Example.org"}, headers={"X-CSRFToken": alice.csrf}
    )
    assert response.status_code == 302
    mail = smtp.inbox.messages[-1]
    assert mail["To"] == "alice.home@example.org"
    url = re.search(r"https://countersign\.example(/settings/channels/email/cs-[0-9a-f]{20})", mail.get_payload()).group(1)
    bob = sign_in("bob@example.com")
    assert bob.client.get(url).status_code == 403
    assert bob.client.post(url, headers={"X-CSRFToken": bob.csrf}).status_code == 403
    assert linked(app, "email", "alice.home@example.org") is None
    assert "Link <strong>alice.home@example.org</strong>" in alice.client.get(url).get_data(as_text=True)
    assert linked(app, "email", "alice.home@example.org") is None  # a GET (a mail scanner's) links nothing
    assert alice.client.post(url, headers={"X-CSRFToken": alice.csrf}).status_code == 302
    assert linked(app, "email", "alice.home@example.org") == "alice@example.com"
    assert alice.client.post(url, headers={"X-CSRFToken": alice.csrf}).status_code == 410  # once


def test_an_email_code_sent_in_a_chat_links_nothing(app, alice, sign_in, services, telegram):
    alice.client.post("/settings/channels/email", data={"address": "a@example.org"}, headers={"X-CSRFToken": alice.csrf})
    code = re.search(r"cs-[0-9a-f]{20}", services[1].inbox.messages[-1].get_payload()).group(0)
    assert telegram_says(app, telegram, "444", f"/start {code}") == links.NOT_VALID


def test_unlinking_makes_the_account_a_stranger(app, alice, telegram):
    with app.app_context():
        ident = db.session.scalar(sa.select(ConnectorIdentity.id).where(ConnectorIdentity.external_id == "111"))
    page = alice.client.get("/settings/channels").get_data(as_text=True)
    assert f"/settings/channels/{ident}/unlink" in page
    assert alice.client.post(f"/settings/channels/{ident}/unlink", headers={"X-CSRFToken": alice.csrf}).status_code == 302
    assert linked(app, "telegram", "111") is None
    assert telegram_says(app, telegram, "111", "delete everything").startswith("Sorry, I don't know who you are here.")
    assert ("unlinked", "telegram") in audit_of(app, "channel.unlinked")


def test_a_person_unlinks_only_their_own(app, sign_in, telegram):
    with app.app_context():
        alices = db.session.scalar(sa.select(ConnectorIdentity.id).where(ConnectorIdentity.external_id == "111"))
    bob = sign_in("bob@example.com")
    assert bob.client.post(f"/settings/channels/{alices}/unlink", headers={"X-CSRFToken": bob.csrf}).status_code == 404
    assert linked(app, "telegram", "111") == "alice@example.com"


def test_an_admin_sees_and_removes_a_persons_link_of_their_tenant_only(app, sign_in, telegram, globex_admin):
    admin = sign_in("admin@example.com")
    page = admin.client.get("/admin/channels").get_data(as_text=True)
    assert "alice@example.com" in page and "111" in page
    with app.app_context():
        alices = db.session.scalar(sa.select(ConnectorIdentity.id).where(ConnectorIdentity.external_id == "111"))
    other = sign_in(globex_admin)
    assert other.client.post(f"/admin/channels/{alices}/remove", headers={"X-CSRFToken": other.csrf}).status_code == 404
    assert linked(app, "telegram", "111") == "alice@example.com"
    alice = sign_in("alice@example.com")
    assert alice.client.get("/admin/channels").status_code == 403
    assert admin.client.post(f"/admin/channels/{alices}/remove", headers={"X-CSRFToken": admin.csrf}).status_code == 302
    assert linked(app, "telegram", "111") is None
    with app.app_context():
        row = db.session.scalar(sa.select(AuditEvent).where(AuditEvent.event == "channel.unlinked"))
        assert row.detail == "111 by admin@example.com" and row.user_id is not None


def test_only_a_whole_code_is_read_as_one():
    code = "cs-" + "a" * 20
    assert links.code_in(f"/start {code}") == code
    assert links.code_in(f"LINK {code.upper()}") == code
    assert links.code_in(code) == code
    assert links.code_in(f"please {code}") is None
    assert links.code_in("link everything") is None
    assert links.code_in(f"/start {code}x") is None


def test_a_claimed_accounts_name_shows_its_hidden_characters(app, alice, telegram):
    """Telegram's first_name is the sender's to choose: markup is text, and a right-to-left
    override cannot make one name read as another."""
    code = new_code(alice)
    telegram_says(app, telegram, "444", f"/start {code}", name="<b>Alice</b>\u202eenohp")
    page = alice.client.get("/settings/channels").get_data(as_text=True)
    assert "<b>Alice</b>" not in page and "&lt;b&gt;Alice&lt;/b&gt;" in page
    assert "\u202e" not in page and "U+202E" in page
