"""The EXTERNAL demo action: a card first, then one email over real SMTP, keyed by the approval."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import OutboxEmail


@pytest.fixture
def app_config(smtp):
    return {"SMTP_URL": smtp.url}


def test_send_email_waits_for_the_card_then_sends_once(app, alice, smtp):
    inbox = smtp.inbox
    inbox.messages.clear()
    convo = alice.new_conversation()
    html = alice.say(convo, '/send_email to=dana@example.org subject="Hello there" body="See you soon"')
    assert "Send this email as alice@example.com?" in html
    assert "<dt>To</dt><dd>dana@example.org</dd>" in html
    assert inbox.messages == []  # nothing left before the confirm
    approval, token = alice.card(html)
    assert "Sent · done" in alice.answer(approval, token).get_data(as_text=True)
    assert alice.answer(approval, token).status_code == 409
    assert len(inbox.messages) == 1
    sent = inbox.messages[0]
    assert sent["To"] == "dana@example.org" and sent["Subject"] == "Hello there"
    assert sent["Message-ID"] == f"<{approval}@countersign>"  # the approval id is the idempotency key
    with app.app_context():
        row = db.session.scalar(sa.select(OutboxEmail))
        assert row.idempotency_key == approval and row.status == "sent"


def test_declined_email_is_never_sent(app, alice, smtp):
    inbox = smtp.inbox
    inbox.messages.clear()
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, "/send_email to=dana@example.org subject=Hi body=Hello"))
    alice.answer(approval, token, "decline")
    assert inbox.messages == []
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(OutboxEmail)) == 0
