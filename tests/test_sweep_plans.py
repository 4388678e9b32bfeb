"""The sweeps every worker runs every TURN_HEARTBEAT (passes gone silent, runs left queued) read an
index of the runs by state, not every run ever kept: on SQLite, with 200,000 ended
runs, 11.3 → 0.29 ms a look for silent passes and 13.4 → 0.15 ms for stranded ones (the statement is
now built once); on PostgreSQL 0.46 → 0.02 and 0.43 → 0.05 ms of execution (2026-12-07).
So do the looks for cards past their time, which every conversation's page makes (and the cron
sweep, for all): 200,000 cards over 20,000 conversations, a page's look 26.7 → 0.12 ms on SQLite
and 49.7 → 0.34 ms on PostgreSQL (a parallel scan of the table), the sweep's 27.2 → 0.30 and 49.1 →
0.24 ms. Each statement's plan is asked of the database the suite runs on."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from app import copilot
from app.copilot.turns import _sweep
from app.extensions import db


def _statements_reading(app: Any, sweep: Any, table: str = "runs") -> list[tuple[str, Any]]:
    """The statements `sweep` ran that read `table`, with their parameters."""
    ran: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and f" {table}" in statement:
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
    ran = _statements_reading(app, sweep)
    assert len(ran) == 1, ran
    statement, parameters = ran[0]
    with app.app_context():
        plan = _plan(statement, parameters)
    assert index in plan, plan
    assert "SCAN runs" not in plan, plan  # (SQLite: no look through the whole table)


@pytest.mark.parametrize(
    ("look", "index"),
    [
        (lambda: copilot.expire_due(), "ix_approvals_status_expires"),
        (lambda: copilot.expire_due(conversation_id=1), ("ix_approvals_status_expires", "ix_approvals_conversation_call")),
        (lambda: copilot.expire_due(user_id=1), None),  # (the person's own index is as selective)
        (lambda: copilot.sweep_interrupted(60), "ix_approvals_status_expires"),
    ],
    ids=["the cron sweep", "a conversation's page", "a person's list", "claims that died"],  # (a page: its cards, either way)
)
def test_each_look_for_cards_past_their_time_reads_the_index_of_cards_by_status(app: Any, look: Any, index: Any) -> None:
    ran = _statements_reading(app, look, table="approvals")
    assert len(ran) == 1, ran
    statement, parameters = ran[0]
    with app.app_context():
        plan = _plan(statement, parameters)
    assert "SCAN approvals" not in plan, plan  # (SQLite: no look through every card ever kept)
    assert index is None or any(name in plan for name in ([index] if isinstance(index, str) else index)), plan
