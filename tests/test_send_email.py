"""The EXTERNAL demo action: a card first, then one email over real SMTP, keyed by the approval."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, AuditEvent, OutboxEmail
from app.status import Status
from tests.conftest import outcome_row


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
    assert outcome_row("Sent", "done") in alice.answer(approval, token).get_data(as_text=True)
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


@pytest.fixture
def held(monkeypatch):
    """The delivery jobs queued, held as a worker that has not run yet would hold them."""
    from app import copilot

    jobs: list[tuple] = []
    monkeypatch.setattr(copilot, "call", lambda target, *args: jobs.append((target, *args)))  # (the front door queues it)
    return jobs


def run_held(app, held):
    """The worker takes the held jobs."""
    from app.copilot.turns._jobs import run_task

    while held:
        target, *args = held.pop(0)
        run_task(app, target, args)


def confirmed_email(alice, subject="Hello"):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/send_email to=dana@example.org subject={subject} body=Hi"))
    return convo, approval, alice.answer(approval, token).get_data(as_text=True)


def test_a_confirmed_email_is_queued_until_the_outbox_delivers_it(app, alice, smtp, held):
    smtp.inbox.messages.clear()
    _, approval, html = confirmed_email(alice)
    assert outcome_row("Queued", "queued") in html and "Sent" not in html
    assert smtp.inbox.messages == [] and held == [("app.copilot.approvals:deliver", approval)]
    with app.app_context():
        assert db.session.get(Approval, approval).status == Status.QUEUED
    run_held(app, held)
    assert len(smtp.inbox.messages) == 1
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert outcome_row("Sent", "done") in page and "Queued" not in page
    with app.app_context():
        assert db.session.get(Approval, approval).result == "Email to dana@example.org sent."


def test_the_audit_log_keeps_the_decision_and_then_the_delivery(app, alice, smtp, held):
    _, approval, _ = confirmed_email(alice)
    run_held(app, held)
    with app.app_context():
        rows = db.session.execute(
            sa.select(AuditEvent.event, AuditEvent.outcome).where(AuditEvent.approval_id == approval).order_by(AuditEvent.id)
        )
        assert [tuple(r) for r in rows][-2:] == [("approval.decided", "queued"), ("approval.delivered", "done")]
        row = db.session.get(Approval, approval)
        assert row.decided_at is not None and row.decided_by == row.user_id  # still its person's decision


def test_a_refused_email_ends_failed_to_send(app, alice, smtp, held):
    smtp.inbox.messages.clear()
    smtp.inbox.refuse = "554 5.7.1 Relay denied"
    try:
        _, approval, html = confirmed_email(alice)
        assert outcome_row("Queued", "queued") in html
        run_held(app, held)
    finally:
        smtp.inbox.refuse = None
    assert smtp.inbox.messages == []
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert outcome_row("Failed to send — the mail server refused it (554 5.7.1 Relay denied)", "failed") in page


def test_the_models_next_turn_reads_that_the_queued_email_was_sent(app, alice, smtp, held, model):
    convo, approval, _ = confirmed_email(alice)
    assert "Queued: handed over for delivery, which has not happened yet" in model.seen()
    assert "sent." not in model.seen()
    run_held(app, held)
    chat = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    assert "Sent: Email to dana@example.org sent." in chat  # the person reads it as a notice
    alice.say(convo, "thanks")
    assert "Update from Countersign" in model.seen() and "Sent: Email to dana@example.org sent." in model.seen()


def test_a_command_after_a_delivery_notice_is_still_the_persons_command(app, alice, smtp, held):
    convo, _, _ = confirmed_email(alice)
    run_held(app, held)  # sent: a notice the model reads before the person's next words
    html = alice.say(convo, "/list_posts")
    assert "Spring meetup (draft)" in html and "Launch notes (published)" in html


def test_the_models_next_turn_reads_that_the_queued_email_failed_to_send(app, alice, smtp, held, model):
    smtp.inbox.refuse = "550 5.1.1 No such user"
    try:
        convo, _, _ = confirmed_email(alice)
        run_held(app, held)
    finally:
        smtp.inbox.refuse = None
    alice.say(convo, "did it go?")
    assert "Failed to send — the mail server refused it (550 5.1.1 No such user). Nothing else was done." in model.seen()


def test_a_second_press_on_a_queued_email_says_it_was_confirmed_and_is_queued(app, alice, smtp, held):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, "/send_email to=dana@example.org subject=Hi body=Hello"))
    alice.answer(approval, token)
    again = alice.answer(approval, token)
    assert again.status_code == 409
    assert "You already confirmed this card at " in again.get_data(as_text=True)
    assert "queued for delivery. Nothing ran again." in again.get_data(as_text=True)
    assert held == [("app.copilot.approvals:deliver", approval)]  # still one delivery, nothing sent twice
