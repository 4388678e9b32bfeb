"""One vocabulary: every status is spelt in app/status.py only, every channel reads its line from
one table, and the database holds no other status."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, Message, Run
from app.status import FINAL, NO_ONE, OUTCOMES, RunStatus, Status, card_line, chat_line, model_line
from tests.conftest import outcome_row
from tests.helpers.cards import form_of, submit

ROOT = Path(__file__).resolve().parent.parent
WORDS = sorted({s.value for s in Status} | {s.value for s in RunStatus})
QUOTED = "|".join(WORDS)
# Two or more quoted status words in one literal: a list of statuses of its own.
A_LIST = re.compile(rf"""["']({QUOTED})["']\s*[,:]\s*(?:[^,\n]*,\s*)?["']({QUOTED})["']""")
# A status compared with, or set to, a spelt word.
SPELT = re.compile(rf"""status\s*(?:[!=]=|=|\bin\b)\s*\(?["']({QUOTED})["']""")


# The demo's own records (a post's, an outbox email's status) are not approvals or runs; a Markdown
# token's type ("text") is not an event's.
DEMO = (ROOT / "app" / "actions", ROOT / "app" / "mail.py", ROOT / "app" / "markdown.py", ROOT / "app" / "markdown")


def sources() -> list[Path]:
    found = [*ROOT.joinpath("app").rglob("*.py"), *ROOT.joinpath("templates").rglob("*.html"), ROOT / "static" / "app.js"]
    return [p for p in found if ROOT / "app" / "status" not in p.parents and not any(p == d or d in p.parents for d in DEMO)]


def test_no_module_but_app_status_spells_a_list_of_statuses_or_compares_with_a_spelt_one():
    problems = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if A_LIST.search(line) or SPELT.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not problems, "status words spelt outside app/status.py:\n" + "\n".join(problems)


# The other words of the vocabulary, each compared with or set to a spelt word.
OTHER_WORDS = {
    "message role": re.compile(r"""\brole\s*(?:[!=]=|=|:)\s*["'](user|assistant|notice|error|card)["']"""),
    "approval type": re.compile(r"""\b(?:type|kind)\s*(?:[!=]=|=)\s*["'](confirm|form)["']"""),
    "run's next": re.compile(r"""\bnext["']?\s*(?:[!=]=|=|:)\s*["'](prompt|results|continue)["']"""),
    "event type": re.compile(r"""(?:publish\([^,()]+,\s*|\.type\s*[!=]=\s*)["'](text|turn|approval|title)["']"""),
    "decision verb": re.compile(
        r"""(?:\bdecision\s*(?:[!=]=|=|:)\s*|["']decision["']\s*:\s*|_answer\(self,\s*|_revise\(|return\s+)"""
        r"""["'](confirm|decline|cancel|submit|edit|refresh|countersign|revoke|expire)["']|<any\((?:confirm|edit)"""
    ),
    "refusal reason": re.compile(r"""\brefuse\((?:[^()]|\([^()]*\))*?,\s*f?["']"""),
    "turn state": re.compile(r"""\bstate["')]*\s*(?:[!=]=|=)\s*["'](started|paused|stopped)["']"""),
}


def spelt_words(text: str) -> list[str]:
    """The vocabulary words `text` spells instead of naming their enum (for each, what it is)."""
    return [what for what, pattern in OTHER_WORDS.items() if pattern.search(text)]


def test_no_module_but_app_status_spells_a_role_a_type_a_next_an_event_or_a_state():
    problems = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for what in spelt_words(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}")
    assert not problems, "vocabulary words spelt outside app/status:\n" + "\n".join(problems)


def test_the_words_check_finds_each_spelling_the_old_code_had():
    old = {
        'said = Message(conversation_id=conversation.id, role="user", text=text)': "message role",
        '{% if message.role == "card" and message.approval %}': "message role",
        'if approval.type == "form" and approval.form and pending:': "approval type",
        'verb = "confirm this" if self.kind == "confirm" else "fill this in"': "approval type",
        'values = {"status": RunStatus.QUEUED, "next": "results", "queued_at": now}': "run's next",
        'if run.next == "results":': "run's next",
        'events.publish(run.conversation_id, "turn", run=run.id, state="started")': "event type",
        'if event.type == "text":': "event type",
        'if event.type == EventType.TURN and event.data.get("state") == "started":': "turn state",
        'raise refuse(Expired(), "token_expired", actor, approval, approval_id)': "refusal reason",
        'values = data.get("values") if decision == "submit" else None': "decision verb",
        '@bp.post("/approvals/<approval_id>/countersign", defaults={"decision": "countersign"}, endpoint="x")': "decision verb",
        '@bp.post("/approvals/<approval_id>/<any(confirm, decline, cancel, submit):decision>")': "decision verb",
        'return self.copilot._answer(self, "confirm")': "decision verb",
        '    return "decline"': "decision verb",
        'raise refuse(AlreadyDecided(msg), f"refresh_{approval.status}", actor, approval, approval.id)': "refusal reason",
    }
    for text, what in old.items():
        assert what in spelt_words(text), text
    assert spelt_words("events.publish(run.conversation_id, EventType.TURN, state=TurnState.STARTED)") == []


def test_the_checks_above_would_find_the_old_lists():
    """The patterns catch the shapes the old code had (so the test above can fail)."""
    old = [
        'FINAL = {"done", "declined", "cancelled"}',
        '    "declined": "Declined — nothing was done.",\n    "expired": "Expired — nothing was done.",',
        '{% for s in ["pending", "done", "declined"] %}',
        'if approval.status == "done":',
        '.values(status="superseded", decided_at=now)',
    ]
    for text in old:
        assert A_LIST.search(text) or SPELT.search(text), text


def test_every_status_has_its_lines_and_every_final_one_says_what_happened():
    assert set(OUTCOMES) == set(Status)
    for status in FINAL:
        outcome = OUTCOMES[status]
        assert outcome.card and outcome.chat and outcome.model and outcome.colour.startswith("#"), status
        assert "{when}" in outcome.by, status  # every decided card says when, and who or what decided it
    assert {Status.PENDING, Status.RUNNING}.isdisjoint(FINAL)


def test_a_press_on_a_card_in_any_state_but_waiting_says_who_decided_it_from_the_one_table():
    for status in set(Status) - {Status.PENDING}:
        pressed = OUTCOMES[status].pressed
        assert "{at}" in pressed, status  # when
        assert any(said in pressed.lower() for said in ("nothing", "not run again", "only once")), status  # and what ran
        assert ("{who}" in pressed) != (status in NO_ONE), status  # a person decided it, or the app itself did


@pytest.mark.parametrize("status", sorted(FINAL - {Status.DONE, Status.QUEUED}))  # queued: handle() ran
def test_nothing_ran_is_said_on_every_channel_for_each_ending_but_done(status):
    class Row:
        type = "confirm"
        result = "boom" if status == Status.FAILED else None

    row = Row()
    row.status = status
    lines = [card_line(row), chat_line(row), model_line(row)]
    assert all(lines), lines
    if status not in (Status.FAILED, Status.INTERRUPTED):  # those may have done part of it
        assert all("nothing" in line.lower() for line in lines[1:]), lines


def test_a_superseded_card_says_so_on_its_page(app, alice, posts):
    from app import copilot

    convo = alice.new_conversation()
    approval, _ = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    with app.app_context():
        copilot.supersede(approval, "slack")
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert "Superseded by a newer card — nothing ran" in page
    badge = '<span class="badge badge--superseded">superseded</span>'  # the status, set apart as a status
    assert badge in page
    beside = page.split("<main", 1)[1].replace(badge, "")
    assert "superseded" not in re.sub(r'class="[^"]*"', "", beside).replace("Superseded", "")


def test_the_database_refuses_a_status_not_in_the_vocabulary(app, alice, posts):
    convo = alice.new_conversation()
    approval, _ = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    with app.app_context():
        with pytest.raises(sa.exc.IntegrityError):
            db.session.execute(sa.update(Approval).where(Approval.id == approval).values(status="approved"))
            db.session.commit()
        db.session.rollback()
        assert db.session.get(Approval, approval).status == Status.PENDING


@pytest.mark.parametrize(
    ("table", "column", "word"),
    [(Run, "status", "approved"), (Message, "role", "system"), (Approval, "type", "question")],
)
def test_the_database_refuses_a_run_status_a_role_or_a_type_not_in_the_vocabulary(app, alice, posts, table, column, word):
    convo = alice.new_conversation()
    alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    with app.app_context():
        row = db.session.scalars(sa.select(table).order_by(table.id.desc()).limit(1)).one()
        before = getattr(row, column)
        with pytest.raises(sa.exc.IntegrityError):
            db.session.execute(sa.update(table).where(table.id == row.id).values({column: word}))
            db.session.commit()
        db.session.rollback()
        assert getattr(db.session.get(table, row.id), column) == before


def test_a_submitted_form_keeps_the_names_it_filled_as_data(app, alice):
    convo = alice.new_conversation()
    html = alice.say(convo, "/draft_post")
    approval, token = form_of(html)
    response = submit(alice, approval, token, title="Kept as data", body="B", status="draft")
    assert response.status_code == 200, response.get_data(as_text=True)
    with app.app_context():
        row = db.session.get(Approval, approval)
        assert row.filled == ["title", "body", "status"]
        assert "Kept as data" not in (row.result or "")
    assert outcome_row("Submitted — filled in: title, body, status", "done") in response.get_data(as_text=True)


def test_every_channel_reads_a_cards_outcome_from_the_one_table(app, alice, posts, monkeypatch):
    from app.api import prompt
    from app.copilot.approvals import Actor, chat_outcome, told
    from app.status import Outcome

    words = Outcome("Turned down", "Turned down in chat.", "Turned down, says the model's line.", "#000", "turned down by {who}")
    monkeypatch.setitem(OUTCOMES, Status.DECLINED, words)
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    html = alice.answer(approval, token, "decline").get_data(as_text=True)
    assert '<span class="card__label">Turned down</span> <span class="badge badge--declined">declined</span>' in html
    assert '<p class="card__decided">Turned down by you</p>' in html
    with app.app_context():
        row = db.session.get(Approval, approval)
        assert chat_outcome(row) == "Turned down in chat. (Turned down by you)"
        assert told(row) == "Turned down, says the model's line."
        shown = prompt(row, Actor(user=row.user, binding="test", channel="api"))
        assert shown["outcome"] == "Turned down" and shown["decided_by"] == "Turned down by you"


def test_no_channel_builds_its_own_outcome_line():
    """Only app/copilot/approvals/_outcomes.py reads the table's line functions (with the action's own words);
    no other module spells a table's sentence or joins a label to a status."""
    lines = {t for o in OUTCOMES.values() for t in (o.card, o.chat, o.model) if len(t) > 12}
    joined = re.compile(rf"· ({QUOTED})\b")
    reads = re.compile(r"\b(card_line|chat_line|model_line)\(|import[^\n]*\b(card_line|chat_line|model_line)\b")
    problems = []
    for path in sources():
        text = path.read_text()
        if path != ROOT / "app" / "copilot" / "approvals" / "_outcomes.py" and reads.search(text):
            problems.append(f"{path.relative_to(ROOT)} reads a line function of app/status.py itself")
        problems += [f"{path.relative_to(ROOT)} spells {line!r}" for line in lines if line in text]
        problems += [f"{path.relative_to(ROOT)} joins a label to a status" for _ in joined.findall(text)]
    assert not problems, "\n".join(problems)
