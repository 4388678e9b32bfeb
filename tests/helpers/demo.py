"""The demo's rows made once per test process and copied into each test's emptied tables.

`seed_demo` finds or makes two tenants, four people and two posts through the ORM, and writes one
file under FILES_ROOT: some fifteen queries that every test would pay. `DemoTemplate.take` runs
the real `seed_demo` once, keeps what it wrote (each table's rows, each file), and empties the
tables again; `restore` puts the same rows and files back in one transaction, so a test starts
from what `seed_demo` makes, as before. The rows keep their ids (on PostgreSQL the sequences
handed them out first, so they never collide with ids handed out later), and their times are the
time of the restore, as a fresh seed's would be."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask

from app.cli import seed_demo
from app.extensions import db
from app.models import UTCDateTime, utcnow


def empty_tables() -> None:
    with db.engine.begin() as conn:
        _empty(conn)


class DemoTemplate:
    def __init__(self, files: Path) -> None:
        self.rows: list[tuple[sa.Table, list[dict[str, Any]]]] = []
        self.files = files  # the demo's files, copied into each test's FILES_ROOT

    def take(self, app: Flask) -> None:
        """Seed the demo once into empty tables (in `app`'s database) and keep what it wrote."""
        with app.app_context():
            app.config["FILES_ROOT"] = str(self.files)
            empty_tables()
            seed_demo()
            db.session.remove()
            with db.engine.connect() as conn:
                for table in db.metadata.sorted_tables:
                    rows = [dict(row) for row in conn.execute(sa.select(table)).mappings()]
                    if rows:
                        self.rows.append((table, rows))
            empty_tables()

    def restore(self, files_root: str) -> None:
        """Empty every table, then write the demo's rows and files back (in an app context)."""
        now = utcnow()
        with db.engine.begin() as conn:
            _empty(conn)
            for table, rows in self.rows:
                times = [c.name for c in table.columns if isinstance(c.type, UTCDateTime)]
                conn.execute(table.insert(), [{**row, **{t: now for t in times if row[t] is not None}} for row in rows])
            if conn.dialect.name == "postgresql":
                # A sequence behind the restored ids (a table made again since) is moved past them.
                conn.exec_driver_sql(
                    "; ".join(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"GREATEST((SELECT MAX(id) FROM {table.name}), nextval(pg_get_serial_sequence('{table.name}', 'id'))))"
                        for table, _rows in self.rows
                    )
                )
        shutil.copytree(self.files, files_root, dirs_exist_ok=True)


def _empty(conn: sa.Connection) -> None:
    tables = list(reversed(db.metadata.sorted_tables))
    if conn.dialect.name == "postgresql":  # one round trip to the server, not one a table
        quote = conn.dialect.identifier_preparer.quote
        conn.exec_driver_sql("; ".join(f"DELETE FROM {quote(table.name)}" for table in tables))
    else:
        for table in tables:
            conn.execute(table.delete())
