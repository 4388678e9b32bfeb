"""Migrations upgrade a database that already holds data: a SQLite file, or on PostgreSQL a schema
of the test's own inside the test database."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from flask_migrate import downgrade, upgrade

from app import create_app
from app.config import _normalise_db_url
from app.copilot import audit
from app.copilot.audit import _chain
from app.extensions import db
from app.models import AuditEvent
from tests.conftest import DATABASE_URL


@pytest.fixture
def empty_url(tmp_path) -> Iterator[str]:
    """A database with nothing in it, of the kind the suite runs on."""
    if not DATABASE_URL.startswith("postgres"):
        yield f"sqlite:///{tmp_path / 'old.sqlite3'}"
        return
    schema = f"migrations_{secrets.token_hex(4)}"
    engine = sa.create_engine(_normalise_db_url(DATABASE_URL))
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    yield f"{DATABASE_URL}{'&' if '?' in DATABASE_URL else '?'}options=-csearch_path%3D{schema}"
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture
def make_app(empty_url):
    made = []

    def make(**config):
        made.append(
            create_app(
                {
                    "COUNTERSIGN_ENV": "testing",
                    "SECRET_KEY": "k",
                    "SWEEP_ON_START": False,
                    "SQLALCHEMY_DATABASE_URI": empty_url,
                    **config,
                }
            )
        )
        return made[-1]

    yield make
    for app in made:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


def rows_before_the_chain(app, n=3):
    """Migrate to 0003 (before the chain) and write n audit rows as that revision did."""
    with app.app_context():
        upgrade(revision="0003")
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO tenants (id, slug, name) VALUES (1, 'acme', 'Acme')"))
            for i in range(n):
                conn.execute(
                    sa.text(
                        "INSERT INTO audit_events (tenant_id, user_id, approval_id, event, outcome, detail, channel, "
                        "created_at) VALUES (1, NULL, NULL, 'approval.decided', 'done', :d, 'web', :t)"
                    ),
                    {"d": f"row {i}", "t": f"2026-11-0{i + 1} 10:00:00.123456"},
                )


def test_audit_rows_written_before_the_chain_are_chained_and_keyed_by_the_upgrade(make_app):
    app = make_app()
    rows_before_the_chain(app)
    with app.app_context():
        upgrade()
        verdict = audit.verify()
        assert verdict.ok and verdict.rows == 3
        assert set(db.session.scalars(sa.select(AuditEvent.key_id))) == {_chain.keyring().current}
        audit.record("approval.decided", "declined", tenant_id=1, user_id=None, detail="after")
        db.session.commit()
        assert audit.verify().ok and audit.verify().rows == 4
    with make_app(AUDIT_KEY="another key").app_context():  # keyed, not merely hashed
        assert "neither AUDIT_KEY nor in AUDIT_KEY_FALLBACKS" in str(audit.verify())


def test_a_row_edited_before_the_upgrade_is_still_named_after_it(make_app):
    app = make_app()
    rows_before_the_chain(app, 4)
    with app.app_context():
        upgrade(revision="0008")  # the unkeyed chain
        edited = db.session.scalar(sa.select(AuditEvent.id).where(AuditEvent.seq == 2))
        db.session.execute(sa.update(AuditEvent).where(AuditEvent.id == edited).values(detail="rewritten"))
        db.session.commit()
        upgrade()  # re-keys row 1 only: re-keying must not launder row 2
        verdict = audit.verify()
        assert not verdict.ok and verdict.broken_id == edited, str(verdict)


def test_downgrade_unkeys_and_upgrade_keys_again(make_app):
    app = make_app()
    rows_before_the_chain(app)
    with app.app_context():
        upgrade()
        audit.record("approval.decided", "declined", tenant_id=1, user_id=None, detail="after")
        db.session.commit()
        downgrade(revision="0008")
        db.session.remove()
        upgrade()
        verdict = audit.verify()
        assert verdict.ok and verdict.rows == 4, str(verdict)


def test_flask_db_upgrade_from_the_command_line(tmp_path):
    """`flask db` is registered without importing Flask-Migrate at start (P4); its commands and
    options are Flask-Migrate's own."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "COUNTERSIGN_ENV": "development", "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}
    env.pop("REDIS_URL", None)
    flask = [sys.executable, "-m", "flask", "--app", "wsgi", "db"]
    said = {}
    for args in (["upgrade"], ["-d", "migrations", "current"], ["check"]):
        done = subprocess.run([*flask, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        said[args[-1]] = done.stdout
    assert "(head)" in said["current"]
