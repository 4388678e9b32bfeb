"""flask connectors: who is who on the chat connectors."""

from __future__ import annotations

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup

from app.extensions import db
from app.models import User

connectors_cli = AppGroup("connectors", help="Chat connectors: who is who.")


@connectors_cli.command("link")
@click.argument("connector", type=click.Choice(["telegram", "slack", "email"]))
@click.argument("external_id")
@click.argument("email")
def connectors_link(connector: str, external_id: str, email: str) -> None:
    """Map a connector identity (a Telegram or Slack user id, an email address) to a person."""
    from app.models import ConnectorIdentity

    user = db.session.scalar(sa.select(User).where(User.email == email.lower()))
    if user is None:
        raise click.ClickException(f"No person with email {email}.")
    external = external_id.lower() if connector == "email" else external_id
    row = db.session.scalar(
        sa.select(ConnectorIdentity).where(ConnectorIdentity.connector == connector, ConnectorIdentity.external_id == external)
    )
    if row is None:
        db.session.add(ConnectorIdentity(connector=connector, external_id=external, user_id=user.id))
    else:
        row.user_id = user.id
    db.session.commit()
    click.echo(f"{connector} {external} -> {email}")


@connectors_cli.command("push-unseen")
@click.option("--after", type=int, default=None, help="Seconds a card waits unseen first (CARDS_UNSEEN_AFTER).")
def connectors_push_unseen(after: int | None) -> None:
    """Send cards that have waited unseen (no page of their person open) to the person's linked
    chats that take cards. Run it from cron, beside `flask approvals sweep`."""
    from app.connectors.push import push_unseen

    sent = push_unseen(after if after is not None else current_app.config["CARDS_UNSEEN_AFTER"])
    click.echo(f"sent {sent}")
