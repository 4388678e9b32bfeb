"""flask users: people's personal access tokens (make, list, revoke) and their browser sessions."""

from __future__ import annotations

import click
import sqlalchemy as sa
from flask.cli import AppGroup

from app.extensions import db
from app.models import ROW_ID_MAX, User

users = AppGroup("users", help="People and their personal access tokens.")


def _person(email: str) -> User:
    user = db.session.scalar(sa.select(User).where(User.email == email.strip().lower()))
    if user is None:
        raise click.ClickException(f"No person with email {email}.")
    return user


@users.command("create-token")
@click.argument("email")
@click.option("--name", default="cli", help="A label for the token.")
@click.option(
    "--scope",
    type=click.Choice(["agent", "client"]),
    default="agent",
    show_default=True,
    help="agent: for MCP clients and agents (chats, calls actions, never answers a card); "
    "client: the person's own app (may answer cards and forms).",
)
@click.option(
    "--toolsets", default="", help="Comma-separated toolsets the token reaches on every route (default: all configured)."
)
def create_token_cmd(email: str, name: str, scope: str, toolsets: str) -> None:
    """Print a new personal access token for EMAIL (shown once; the first line is the token)."""
    from app.auth import create_token, known_toolsets

    user = _person(email)
    wanted = [t.strip() for t in toolsets.split(",") if t.strip()]
    known = known_toolsets()
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise click.ClickException(f"Unknown toolset {', '.join(unknown)}; known: {', '.join(known)}.")
    click.echo(create_token(user, name, ",".join(wanted), scope=scope))
    click.echo(f"scope: {scope}  toolsets: {','.join(wanted) or 'all configured'}", err=True)


@users.command("tokens")
@click.argument("email")
def tokens_cmd(email: str) -> None:
    """List EMAIL's tokens: id, name, scope, toolsets, created, revoked (never the token)."""
    from app.models import ApiToken

    user = _person(email)
    rows = db.session.scalars(sa.select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id))
    click.echo(f"{'id':>5}  {'name':<20} {'scope':<7} {'toolsets':<20} {'created':<20} revoked")
    for t in rows:
        click.echo(
            f"{t.id:>5}  {t.name[:20]:<20} {t.scope:<7} {(t.toolsets or 'all configured')[:20]:<20} "
            f"{t.created_at:%Y-%m-%d %H:%M} UTC  {'yes' if t.revoked else 'no'}"
        )


@users.command("revoke-token")
@click.argument("token_id", type=int)
@click.option("--reason", default="", help="Why, for the audit log.")
def revoke_token_cmd(token_id: int, reason: str) -> None:
    """Revoke token ID at once (audited): it no longer authenticates, nor answers its cards."""
    from app.auth import revoke_token
    from app.models import ApiToken

    token = db.session.get(ApiToken, token_id) if 0 < token_id <= ROW_ID_MAX else None
    if token is None:
        raise click.ClickException(f"No token {token_id}.")
    if not revoke_token(token, None, "cli", reason.strip()):
        raise click.ClickException(f"Token {token_id} was already revoked.")
    click.echo(f"Revoked token {token_id} ({token.name}) of {token.user.email}.")


@users.command("sign-out")
@click.argument("email")
def sign_out_cmd(email: str) -> None:
    """End every browser session of EMAIL (a lost laptop): their cookies stop working at once."""
    from app.auth import end_sessions

    click.echo(f"Ended {end_sessions(_person(email).id)} session(s).")
