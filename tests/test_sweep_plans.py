"""The sweeps every worker runs every TURN_HEARTBEAT (passes gone silent, runs left queued) read an
index of the runs by state, not every run ever kept: on SQLite, with 200,000 ended
runs, 11.3 → 0.29 ms a look for silent passes and 13.4 → 0.15 ms for stranded ones (the statement is
now built once); on PostgreSQL 0.46 → 0.02 and 0.43 → 0.05 ms of execution (2026-12-07).
Each statement's plan is asked of the database the suite runs on."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from app.copilot.turns import _sweep
from app.extensions import db


def _statements_reading_runs(app: Any, sweep: Any) -> list[tuple[str, Any]]:
    """The statements `sweep` ran that read the runs table, with their parameters."""
    ran: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and " runs" in statement:
            ran.append((statement, parameters))

    with app.app_context():
        sa.event.listen(db.engine, "before_cursor_execute", seen)
        try:
            sweep()
        finally:
            sa.event.remove(db.engine, "before_cursor_execute", seen)
            db.session.rollback()
    return ran


def _plan(statement: str, parameters: Any) -> str:
    """The database's plan for the statement (PostgreSQL: an index it can use rather than a scan
    of a table that a test leaves nearly empty)."""
    with db.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            return "\n".join(str(row[-1]) for row in rows)
        with conn.begin():
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            return "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters))


@pytest.mark.parametrize(
    ("sweep", "index"),
    [
        (lambda: _sweep.sweep_dead(60), "ix_runs_status_updated"),
        (lambda: _sweep.resubmit_stranded(60), "ix_runs_status_updated"),
    ],
    ids=["silent passes", "stranded runs"],
)
def test_each_sweep_reads_the_partial_index_of_the_runs_in_its_state(app: Any, sweep: Any, index: str) -> None:
    ran = _statements_reading_runs(app, sweep)
    assert len(ran) == 1, ran
    statement, parameters = ran[0]
    with app.app_context():
        plan = _plan(statement, parameters)
    assert index in plan, plan
    assert "SCAN runs" not in plan, plan  # (SQLite: no look through the whole table)
