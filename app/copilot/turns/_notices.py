"""Telling the people who may countersign that a card waits for them: an email when SMTP_URL is
set, with the card's own sentence and rows (never the model's arguments) and a link to its page."""

from __future__ import annotations

import logging
from email.message import EmailMessage

import sqlalchemy as sa
from flask import current_app

from app.copilot.actions import Registry, registry
from app.copilot.approvals import card_url, may_countersign
from app.copilot.turns import _jobs as jobs
from app.extensions import db
from app.mail import smtp_send
from app.models import Approval, User
from app.status import Status

log = logging.getLogger(__name__)
MOST = 50  # countersigners mailed about one card at most


def countersigners(approval: Approval, registry: Registry) -> list[User]:
    """The people of the card's tenant who may give its second signature (never its own person)."""
    people = db.session.scalars(sa.select(User).where(User.tenant_id == approval.tenant_id).order_by(User.id))
    return [u for u in people if may_countersign(approval, u, registry)][:MOST]


def queue_countersign_notice(approval: Approval) -> None:
    """Tell the app's countersign listeners (`listen_countersign`: the chat connectors), and mail
    the countersigners as a job (a slow SMTP server never holds the person's confirm)."""
    for listener in list(current_app.extensions.get("turns.countersign_listeners", ())):
        try:
            listener(approval.id)
        except Exception:
            log.exception("a countersign listener failed for %s", approval.id)
    if not current_app.config.get("SMTP_URL"):
        return
    try:
        jobs.call("app.copilot.turns._notices:send_countersign_notice", approval.id)
    except Exception:  # the queue is down: the card still waits on the console and its page
        log.warning("could not queue the countersign notice for %s", approval.id, exc_info=True)


def send_countersign_notice(approval_id: str) -> list[str]:
    """The job: mail the notice if the card still waits for its countersignature."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.status != Status.COUNTERSIGNING:
        return []
    return countersign_wanted(approval, registry())


def countersign_wanted(approval: Approval, registry: Registry) -> list[str]:
    """Mail each allowed countersigner a notice; the addresses mailed (none without SMTP_URL).
    A failure to send is logged: the card still waits on the console and its page."""
    if not current_app.config.get("SMTP_URL"):
        return []
    sent = []
    for person in countersigners(approval, registry):
        try:
            smtp_send(_notice(approval, person))
            sent.append(person.email)
        except Exception:  # SMTP down or refusing: the queue on the console still shows the card
            log.warning("could not mail the countersign notice for %s to user %s", approval.id, person.id, exc_info=True)
    return sent


def _notice(approval: Approval, to: User) -> EmailMessage:
    rows = "".join(f"\n  {row['label']}: {row['value']}" for row in approval.rows)
    message = EmailMessage()
    message["From"] = current_app.config["MAIL_FROM"]
    message["To"] = to.email
    message["Subject"] = "Waiting for your countersignature"
    message.set_content(
        f"{approval.user.email} confirmed a request that needs a second signature before it runs:\n\n"
        f"{approval.reason}{rows}\n\n"
        f"Countersign or decline it, signed in, before {approval.expires_at:%Y-%m-%d %H:%M} UTC:\n"
        f"{card_url(approval.id)}\n"
    )
    return message
