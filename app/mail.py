"""Outbound email over SMTP_URL (smtp://user:pass@host:port); without it, mail stays queued."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlparse

from flask import current_app


def deliver(email: Any, sender: str) -> None:
    """Send an outbox row once; its idempotency key travels as the Message-ID."""
    if not current_app.config.get("SMTP_URL"):
        email.status = "queued"
        return
    message = EmailMessage()
    message["From"] = current_app.config["MAIL_FROM"]
    message["Reply-To"] = sender
    message["To"] = email.to
    message["Subject"] = email.subject
    if email.idempotency_key:
        message["Message-ID"] = f"<{email.idempotency_key}@countersign>"
    message.set_content(email.body)
    smtp_send(message)
    email.status = "sent"


def smtp_send(message: EmailMessage) -> None:
    """Send one message through SMTP_URL (refuses when it is unset)."""
    url = current_app.config.get("SMTP_URL")
    if not url:
        raise RuntimeError("SMTP_URL is not set")
    parts = urlparse(url)
    smtp_class = smtplib.SMTP_SSL if parts.scheme == "smtps" else smtplib.SMTP
    with smtp_class(parts.hostname or "localhost", parts.port or 25, timeout=10) as smtp:
        if parts.username:
            smtp.login(unquote(parts.username), unquote(parts.password or ""))
        smtp.send_message(message)
