"""Email: an inbound-mail webhook (JSON, HMAC-signed by the provider) and replies over SMTP that
keep the thread (In-Reply-To / References)."""

from __future__ import annotations

import hashlib
import hmac
import re
from email.message import EmailMessage
from typing import Any

from flask import current_app

from app.connectors.base import Connector, Inbound
from app.mail import smtp_send
from app.models import ConnectorThread

ADDRESS = re.compile(r"<([^>]+)>")


class Email(Connector):
    name = "email"

    def send(self, thread: ConnectorThread, text: str) -> None:
        message = EmailMessage()
        message["From"] = current_app.config["MAIL_FROM"]
        message["To"] = thread.address
        subject = thread.subject or "Countersign"
        message["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
        message["In-Reply-To"] = thread.thread_key
        message["References"] = thread.thread_key
        message.set_content(text)
        smtp_send(message)


def verified(headers: Any, body: bytes) -> bool:
    """X-Countersign-Signature: sha256=<hex HMAC of the raw body with EMAIL_WEBHOOK_SECRET>."""
    secret = current_app.config["EMAIL_WEBHOOK_SECRET"] or ""
    given = headers.get("X-Countersign-Signature", "")
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return bool(secret) and hmac.compare_digest(expected.encode(), given.encode())


def parse(mail: dict[str, Any]) -> Inbound | None:
    """The thread is the first Message-ID of References, else In-Reply-To, else this message's."""
    sender = str(mail.get("from") or "")
    found = ADDRESS.search(sender)
    address = (found.group(1) if found else sender).strip().lower()
    message_id = str(mail.get("message_id") or "")
    references = str(mail.get("references") or "").split()
    root = references[0] if references else (mail.get("in_reply_to") or message_id)
    if not address or not root:
        return None
    return Inbound(connector="email", thread_key=str(root), sender=address, text=str(mail.get("text") or ""),
                   event_id=message_id or str(root), has_files=bool(mail.get("attachments")),
                   address=address, subject=str(mail.get("subject") or ""))
