"""What a person's turns, a card's answer and the pages (an admin's too) read is found by an index, never by reading
a whole table: each statement they make is put to the database for its plan. Found this way
(2026-12-07), each growing with everything ever kept: every turn's end read every chat thread
(whether the conversation has one: 8.7 ms with 100,000 threads, SQLite), a message written while a
card waits read every card (29.3 ms with 200,000), and every conversation's page read every run
(the agents' words: 30.8 ms with 200,000) and every card (those past their time: 26.7 ms,
tests/test_sweep_plans.py). On PostgreSQL the plans are asked with sequential scans off (a test's
tables are nearly empty, where a scan is the cheaper plan)."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from app.extensions import db
from tests.conftest import api_headers


def _statements(app: Any, act: Any) -> list[tuple[str, Any]]:
    """Each distinct statement `act` made that reads a table (SELECT, UPDATE, DELETE), with the
    parameters it first ran with."""
    ran: dict[str, Any] = {}

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")) and not executemany:
            ran.setdefault(statement, parameters)

    with app.app_context():
        sa.event.listen(db.engine, "before_cursor_execute", seen)
    try:
        act()
    finally:
        with app.app_context():
            sa.event.remove(db.engine, "before_cursor_execute", seen)
    return list(ran.items())


def _whole_tables_read(statement: str, parameters: Any) -> list[str]:
    with db.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            steps = [str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)]
            return [step for step in steps if re.fullmatch(r"SCAN \w+", step)]  # (not USING ... INDEX)
        with conn.begin():
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # (a test's tables are nearly empty)
            steps = [row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters)]
        return [step.strip() for step in steps if "Seq Scan on" in step]


def test_a_persons_turns_cards_and_pages_read_no_whole_table(app, alice, sign_in):
    from app.auth import create_token
    from app.models import User

    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(user, scope="client"))

    def a_persons_day() -> None:
        convo = alice.new_conversation()
        alice.say(convo, "/list_posts")
        approval, token = alice.card(alice.say(convo, "/delete_post post=1"))
        alice.say(convo, "and another thing")  # (written while the card waits)
        assert alice.answer(approval, token).status_code == 200
        for page in ("/", "/?q=post", f"/c/{convo}", f"/approvals/{approval}", "/settings/channels"):
            assert alice.client.get(page).status_code == 200, page
        admin = sign_in("admin@example.com")
        for page in ("/admin/", "/admin/live", "/admin/audit", "/admin/audit.csv", "/admin/channels", "/admin/tokens"):
            assert admin.client.get(page).status_code == 200, page
        api = app.test_client()
        for path in ("/api/conversations", f"/api/conversations/{convo}", "/api/approvals"):
            assert api.get(path, headers=headers).status_code == 200, path

    ran = _statements(app, a_persons_day)
    assert len(ran) > 20, ran  # (the day was read: pages, turns and a card)
    with app.app_context():
        whole = {" ".join(statement.split())[-300:]: found for statement, p in ran if (found := _whole_tables_read(statement, p))}
    assert not whole, "\n".join(f"{tables}: {statement}" for statement, tables in whole.items())
