"""flask commands: demo, actions, users (tokens, sessions), approvals sweep."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import click
import sqlalchemy as sa
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext
from werkzeug.security import generate_password_hash

from app.copilot import engine, expire_due, sweep_interrupted
from app.copilot.actions import secret_fields, tool_schema
from app.extensions import db
from app.models import ROW_ID_MAX, Post, Tenant, User

DEMO_PASSWORD = "demo"


def register(app: Flask) -> None:
    app.cli.add_command(demo)
    app.cli.add_command(actions)
    app.cli.add_command(users)
    app.cli.add_command(approvals_cli)
    app.cli.add_command(audit_cli)
    app.cli.add_command(connectors_cli)
    app.cli.add_command(worker)
    app.cli.add_command(mcp_command)


@click.command()
@with_appcontext
def demo() -> None:
    """Seed the demo tenants, people and posts (never in production)."""
    if current_app.config["COUNTERSIGN_ENV"] == "production" and not current_app.debug:
        raise click.ClickException("`demo` seeds known passwords; run it with COUNTERSIGN_ENV=development.")
    seed_demo()
    click.echo("Demo ready: sign in as alice@example.com with password 'demo'.")
    click.echo(DEMO_TOKENS)


DEMO_TOKENS = """Tokens (pick the scope by who holds it), in another shell here, or in the admin console's
Tokens tab (admin@example.com):
  agent  - for an MCP client or any agent: chats and calls actions, never answers a card or a form
           .venv/bin/flask --app wsgi users create-token alice@example.com --name laptop-mcp
           .venv/bin/flask --app wsgi users create-token alice@example.com --name blog-bot --toolsets blog
  client - for the person's own app, which may answer cards like the browser does
           .venv/bin/flask --app wsgi users create-token alice@example.com --name my-app --scope client
  list them: .venv/bin/flask --app wsgi users tokens alice@example.com
  revoke one: .venv/bin/flask --app wsgi users revoke-token ID --reason "lost laptop"  (ID: from the list)"""


@functools.cache
def _demo_hash() -> str:
    """One scrypt hash of the demo password per process (hashing is slow on purpose)."""
    return generate_password_hash(DEMO_PASSWORD)


def seed_demo() -> dict[str, User]:
    """Tenants acme and globex with their people and alice's two posts; idempotent."""
    people: dict[str, User] = {}
    for slug, name, members in (
        (
            "acme",
            "Acme",
            [("alice@example.com", "Alice", False), ("bob@example.com", "Bob", False), ("admin@example.com", "Admin", True)],
        ),
        ("globex", "Globex", [("carol@example.com", "Carol", False)]),
    ):
        tenant = db.session.scalar(sa.select(Tenant).where(Tenant.slug == slug))
        if tenant is None:
            tenant = Tenant(slug=slug, name=name)
            db.session.add(tenant)
            db.session.flush()
        for email, person, admin in members:
            user = db.session.scalar(sa.select(User).where(User.email == email))
            if user is None:
                user = User(tenant_id=tenant.id, email=email, name=person, is_admin=admin, password_hash=_demo_hash())
                db.session.add(user)
                db.session.flush()
            people[email] = user
    alice = people["alice@example.com"]
    demo_file = Path(current_app.config["FILES_ROOT"], "acme", "reports", "old.csv")
    if not demo_file.exists():
        demo_file.parent.mkdir(parents=True, exist_ok=True)
        demo_file.write_text("month,visits\n2026-01,120\n")
    for title, status in (("Spring meetup", "draft"), ("Launch notes", "published")):
        exists = db.session.scalar(sa.select(Post).where(Post.tenant_id == alice.tenant_id, Post.title == title))
        if exists is None:
            db.session.add(
                Post(tenant_id=alice.tenant_id, author_id=alice.id, title=title, body=f"{title}: text.", status=status)
            )
    db.session.commit()
    return people


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the schemas as JSON.")
@click.pass_context
@with_appcontext
def actions(context: click.Context, as_json: bool) -> None:
    """List the actions with kind, toolsets and schema (`actions check`: their contract)."""
    if context.invoked_subcommand is not None:
        return
    registry = engine().registry
    rows: list[dict[str, Any]] = [
        {
            "name": a.name,
            "kind": a.kind.value,
            "toolsets": list(a.toolsets),
            "schema": tool_schema(a.Input),
            "source": a.source,
            "asks_for_secret": sorted(secret_fields(a.Input)) if a.ask_for_missing else [],
            "countersign": _countersign_of(a),
            "editable": list(a.editable),
        }
        for a in registry.actions.values()
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in sorted(rows, key=lambda r: r["name"]):
        fields = ", ".join(f"{k}{'*' if k in row['schema'].get('required', []) else ''}" for k in row["schema"]["properties"])
        flag = f"  ! secret {', '.join(row['asks_for_secret'])}: a form will refuse it" if row["asks_for_secret"] else ""
        second = f"  countersigned by: {row['countersign']}" if row["countersign"] else ""
        click.echo(f"{row['name']:<16} {row['kind']:<12} {','.join(row['toolsets']) or '-':<8} ({fields}){flag}{second}")


def _countersign_of(action: Any) -> str:
    """Who must countersign the action's cards, as `flask actions` lists it ("" for nobody)."""
    rule = action.countersign
    if isinstance(rule, dict):
        return ", ".join(f"{operation}: {getattr(one, 'label', one)}" for operation, one in rule.items())
    return "" if rule is None else str(getattr(rule, "label", rule))


@actions.command("check")
@with_appcontext
def actions_check() -> None:
    """Check every DESTRUCTIVE/EXTERNAL action (and operation map): no handle() before a confirm,
    no model argument on its card, no confirm by another person, nothing run on decline."""
    import tempfile

    from app.copilot.kit import check_all, migrated_template, running

    package = current_app.config.get("ACTIONS_PACKAGE", "app.actions")
    registry = engine().registry
    names = sorted(a.name for a in registry.actions.values() if a.may_need_card())
    every_toolset = sorted({t for a in registry.actions.values() for t in a.toolsets})
    with tempfile.TemporaryDirectory() as workdir:
        factory = current_app.extensions["countersign.factory"]  # (the kit makes throwaway apps with it)
        template = migrated_template(Path(workdir, "template.sqlite3"), factory=factory, ACTIONS_PACKAGE=package)
        results = check_all(
            lambda: running(
                template,
                Path(workdir),
                freeze=False,
                factory=factory,
                ACTIONS_PACKAGE=package,
                COUNTERSIGN_TOOLSETS=every_toolset,
            ),
            names,
        )
    failed = False
    for name, problems in results.items():
        if problems:
            failed = True
            for problem in problems:
                click.echo(f"FAIL {problem}")
        else:
            click.echo(f"ok   {name}")
    if failed:
        raise SystemExit(1)


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


audit_cli = AppGroup("audit", help="The audit log.")


@audit_cli.command("verify")
@click.option(
    "--against",
    "checkpoint",
    metavar="CHECKPOINT",
    help="A line `audit checkpoint` printed (or a file holding it): fail unless every chain still holds it.",
)
def audit_verify(checkpoint: str | None) -> None:
    """Walk every tenant's audit chain; name the first broken row (exit 1) or say it verifies."""
    from app.copilot.audit import CHECKPOINT_PREFIX, verify, verify_against

    verdict = verify()
    click.echo(str(verdict))
    if verdict.ok and checkpoint is not None:
        line = checkpoint if checkpoint.startswith(CHECKPOINT_PREFIX) else _read(checkpoint)
        verdict = verify_against(line)
        click.echo(f"checkpoint of {verdict.rows} chain(s) holds" if verdict.ok else str(verdict))
    if not verdict.ok:
        raise SystemExit(1)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as error:
        raise click.ClickException(f"--against: not a checkpoint line, nor a file holding one ({error.strerror}).") from None


@audit_cli.command("checkpoint")
def audit_checkpoint() -> None:
    """Print every chain's head (chain:seq:hash:mac) as one line to keep elsewhere, for `verify --against`;
    refuses (exit 1) while a chain does not verify."""
    from app.copilot.audit import checkpoint, verify

    verdict = verify()
    if not verdict.ok:
        click.echo(f"no checkpoint: {verdict}", err=True)
        raise SystemExit(1)
    click.echo(checkpoint())


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


@click.command("worker")
@click.option(
    "--threads", type=int, default=None, help="Turns run at once (default WORKER_THREADS); each waits on the worker's event loop."
)
@click.option("--burst", is_flag=True, help="Work until the queues are empty, then stop.")
@with_appcontext
def worker(threads: int | None, burst: bool) -> None:
    """Run turns and connector deliveries from Redis (Dramatiq) until stopped (needs REDIS_URL)."""
    from app import copilot

    if not current_app.config.get("REDIS_URL"):
        raise click.ClickException("Set REDIS_URL: without it, turns run in the web process's own pool.")
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    threads = threads or current_app.config["WORKER_THREADS"]
    if burst:
        copilot.drain(app, threads)
    else:
        copilot.worker(app, threads)


@click.command("mcp")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8765, type=int)
@with_appcontext
def mcp_command(host: str, port: int) -> None:
    """Serve MCP (streamable HTTP at /mcp) with uvicorn, over this app's database and actions."""
    import uvicorn

    from app.mcp import create_mcp_app

    uvicorn.run(create_mcp_app(current_app._get_current_object()), host=host, port=port)  # type: ignore[attr-defined]


approvals_cli = AppGroup("approvals", help="Housekeeping for approvals.")


@approvals_cli.command("sweep")
@click.option(
    "--interrupted-after", type=int, default=None, help="Seconds a claimed approval may run before it counts as interrupted."
)
def sweep(interrupted_after: int | None) -> None:
    """Expire overdue cards, end dead claims as interrupted and tell the waiting runs; end the
    turns of dead workers as interrupted (with Retry)."""
    from app.copilot import sweep_dead

    grace = interrupted_after if interrupted_after is not None else current_app.config["APPROVALS_INTERRUPTED_AFTER"]
    expired = expire_due()
    interrupted = sweep_interrupted(grace)
    dead = sweep_dead(current_app.config["TURN_DEAD_AFTER"])
    click.echo(f"expired {len(expired)}, interrupted {len(interrupted)}, turns interrupted {len(dead)}")
