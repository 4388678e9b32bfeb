"""Migrations upgrade a database that already holds data."""

from __future__ import annotations

import sqlalchemy as sa
from flask_migrate import upgrade

from app import create_app
from app.copilot.audit import verify
from app.extensions import db


def test_audit_rows_written_before_the_chain_are_chained_by_the_upgrade(tmp_path):
    app = create_app({"COUNTERSIGN_ENV": "testing", "SECRET_KEY": "k", "SWEEP_ON_START": False,
                      "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'old.sqlite3'}"})
    with app.app_context():
        upgrade(revision="0003")
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO tenants (id, slug, name) VALUES (1, 'acme', 'Acme')"))
            for i in range(3):
                conn.execute(sa.text(
                    "INSERT INTO audit_events (tenant_id, user_id, approval_id, event, outcome, detail, channel, "
                    "created_at) VALUES (1, NULL, NULL, 'approval.decided', 'done', :d, 'web', :t)"),
                    {"d": f"row {i}", "t": f"2026-11-0{i + 1} 10:00:00.123456"})
        upgrade()
        verdict = verify()
        assert verdict.ok and verdict.rows == 3
        from app.copilot import audit

        audit.record("approval.decided", "declined", tenant_id=1, user_id=None, detail="after")
        db.session.commit()
        assert verify().ok and verify().rows == 4
        db.engine.dispose()
