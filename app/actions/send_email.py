import smtplib

import sqlalchemy as sa
from pydantic import BaseModel, EmailStr, Field, field_validator

from app.copilot.actions import Action, Delivery, Kind, expose
from app.copilot.lookalike import email_shown
from app.mail import deliver
from app.models import OutboxEmail


@expose("mail")
class SendEmail(Action):
    """Send an email on your behalf."""

    kind = Kind.EXTERNAL
    delivery = Delivery.QUEUED  # handle() puts it in the outbox; deliver() sends it
    examples = ["/send_email to=dana@example.org subject=Hello body=Hi", "send an email", "email someone"]
    shows = ("to", "subject", "body")  # an email's text is what the person approves
    editable = ("to", "subject", "body")  # the person may correct it on the card before it goes

    class Input(BaseModel):
        to: EmailStr = Field(description="The recipient's address")
        subject: str = Field(max_length=200, description="The subject line")
        body: str = Field(max_length=10000, description="The message")

        @field_validator("subject")
        @classmethod
        def one_line(cls, subject: str) -> str:
            """A subject is one line: a line break would read as a header of its own on the card."""
            if any(ch in subject for ch in "\r\n\u2028\u2029\x85\x0b\x0c"):
                raise ValueError("The subject is one line: no line breaks.")
            return subject

    def approval_reason(self, ctx, input):
        return f"Send this email as {ctx.user.email}?"

    def approval_summary(self, ctx, input):
        to, warnings = email_shown(input.to)  # an address that is not plain ASCII: its punycode, and a warning
        rows = {"To": to, "Subject": input.subject, "Message": input.body}
        return {**rows, "Warning": " ".join(warnings)} if warnings else rows

    def handle(self, ctx, input):
        """Put the email in the outbox; it goes out with deliver(), once this card's answer is kept."""
        email = OutboxEmail(
            tenant_id=ctx.tenant.id,
            sender_id=ctx.user.id,
            to=input.to,
            subject=input.subject,
            body=input.body,
            idempotency_key=ctx.approval_id,
        )
        ctx.db.add(email)
        ctx.db.flush()  # the unique key stops a second send before anything leaves
        return f"Email to {input.to} queued in the outbox."

    def deliver(self, ctx, input):
        """Send the outbox's email for this card (raises when the mail server refuses it)."""
        email = ctx.db.scalar(sa.select(OutboxEmail).where(OutboxEmail.idempotency_key == ctx.approval_id))
        if email is None:
            raise LookupError("its email is no longer in the outbox")
        if email.status == "sent":  # sent already (a job run twice): never a second time
            return f"Email to {email.to} sent."
        try:
            deliver(email, sender=ctx.user.email)
        except smtplib.SMTPResponseException as refused:  # the server's own words, not a Python tuple
            said = refused.smtp_error.decode(errors="replace") if isinstance(refused.smtp_error, bytes) else refused.smtp_error
            raise RuntimeError(f"the mail server refused it ({refused.smtp_code} {said})") from refused
        ctx.db.commit()
        return f"Email to {email.to} {email.status}." if email.status == "sent" else None
