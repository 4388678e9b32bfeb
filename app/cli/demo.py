"""flask demo: the demo's tenants, people and posts (never in production)."""

from __future__ import annotations

import functools
from pathlib import Path

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import with_appcontext
from werkzeug.security import generate_password_hash

from app.extensions import db
from app.models import Post, Tenant, User

DEMO_PASSWORD = "demo"


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
