"""Files and links (issue 13, point 7): a delete acts on a link itself, never on what it points to;
no link is followed to read, list or delete; a folder delete that stops partway says exactly what
was and wasn't deleted, to the person and to the model; no server path appears in any message."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.copilot.kit import tool_call
from app.extensions import db
from app.models import Approval, AuditEvent, Message
from tests.conftest import outcome_row
from tests.helpers.countersign import both_signatures


@pytest.fixture
def files(app):
    """acme's folder, and globex's next to it (another tenant's files: never reachable from acme)."""
    root = Path(app.config["FILES_ROOT"])
    acme, globex = root / "acme", root / "globex"
    (acme / "archive").mkdir(parents=True)
    (acme / "archive" / "2025.csv").write_text("kept")
    (acme / "notes.txt").write_text("hello")
    globex.mkdir()
    (globex / "secret.txt").write_text("globex only")
    return acme, globex


def everything_said(app, model, *pages):
    """Every message, card, result and audit line the person or the model could read."""
    with app.app_context():
        stored = [
            *db.session.scalars(sa.select(Message.text)),
            *(f"{a.reason} {a.rows} {a.result}" for a in db.session.scalars(sa.select(Approval))),
            *(f"{e.detail}" for e in db.session.scalars(sa.select(AuditEvent))),
        ]
    return "\n".join([*stored, model.seen(), *pages])


def last_seen(model):
    """What the model was sent on its latest call (this conversation's history only)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_json(model.requests[-1]).decode()


def test_deleting_a_link_removes_the_link_and_keeps_its_target(app, alice, files):
    acme, _ = files
    (acme / "alias.csv").symlink_to(acme / "reports" / "old.csv")
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=alias.csv")
    assert "Delete the file at alias.csv on disk local?" in html
    assert "a link: only the link is removed, never what it points to" in html
    assert outcome_row("Deleted", "done") in alice.answer(*alice.card(html)).get_data(as_text=True)
    assert not (acme / "alias.csv").is_symlink()
    assert (acme / "reports" / "old.csv").read_text() == "month,visits\n2026-01,120\n"


def test_a_link_to_another_tenants_file_is_never_read(app, alice, model, files):
    acme, globex = files
    (acme / "peek.txt").symlink_to(globex / "secret.txt")
    model.enqueue(tool_call("manage_files", operation="read", path="peek.txt"))
    alice.say(alice.new_conversation(), "read peek")
    said = everything_said(app, model)
    assert "Refused: peek.txt is a link; links are never followed" in said and "globex only" not in said


def test_a_linked_folder_is_never_entered_to_read_list_or_delete(app, alice, model, files):
    acme, globex = files
    (acme / "shared").symlink_to(globex)
    convo = alice.new_conversation()
    listed = alice.say(convo, "/manage_files operation=list")
    assert "shared (link, not followed)" in listed and "secret.txt" not in listed
    for operation in ("read", "delete"):
        model.enqueue(tool_call("manage_files", operation=operation, path="shared/secret.txt"))
        alice.say(alice.new_conversation(), operation)
        assert "No file or folder 'shared/secret.txt' here (it goes through a link or a file)." in last_seen(model)
    model.enqueue(tool_call("manage_files", operation="delete_folder", path="shared"))
    alice.say(convo, "delete the folder")
    said = everything_said(app, model)
    assert "Refused: shared is a link; links are never followed" in said and "globex only" not in said
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
    assert (globex / "secret.txt").exists()


def test_a_folder_delete_removes_links_inside_it_but_not_their_targets(app, alice, files, sign_in):
    acme, globex = files
    (acme / "reports" / "elsewhere").symlink_to(globex)
    (acme / "reports" / "archive").symlink_to(acme / "archive")
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete_folder path=reports")
    assert "Links inside" in html and "2 (only the links are removed)" in html
    response = both_signatures(alice, sign_in("admin@example.com"), html)
    assert outcome_row("Deleted", "done") in response
    assert not (acme / "reports").exists()
    assert (globex / "secret.txt").exists() and (acme / "archive" / "2025.csv").exists()


def test_a_folder_delete_that_stops_partway_says_what_was_and_was_not_deleted(app, alice, model, files, monkeypatch, sign_in):
    acme, _ = files
    (acme / "reports" / "locked.csv").write_text("x")
    (acme / "reports" / "zeta.csv").write_text("z")
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if str(path).endswith("locked.csv"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete_folder path=reports")
    page = both_signatures(alice, sign_in("admin@example.com"), html)
    account = (
        "Partly done: deleted 2 of 4 items in reports; not deleted: reports/locked.csv (Permission denied), "
        "reports (Directory not empty)."
    )
    assert f"Failed — {account}" in page
    assert f"Failed. {account}" in model.seen() and "Nothing else was done" not in model.seen()
    assert sorted(p.name for p in (acme / "reports").iterdir()) == ["locked.csv"]
    assert app.config["FILES_ROOT"] not in everything_said(app, model, html, page)


def test_a_failing_file_operation_names_no_server_path(app, alice, model, files, monkeypatch):
    acme, _ = files

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(acme / "notes.txt"))

    convo = alice.new_conversation()
    html = alice.say(convo, "/manage_files operation=delete path=notes.txt")
    monkeypatch.setattr(os, "unlink", refuse)
    monkeypatch.setattr(os, "open", refuse)
    page = alice.answer(*alice.card(html)).get_data(as_text=True)
    assert "Failed — notes.txt: Permission denied." in page
    model.enqueue(tool_call("manage_files", operation="read", path="notes.txt"))
    alice.say(convo, "read it")
    said = everything_said(app, model, html, page)
    assert "Failed: notes.txt: Permission denied." in said
    assert app.config["FILES_ROOT"] not in said and str(acme) not in said


def test_an_os_error_from_any_action_is_told_without_its_file_name():
    from app.copilot.approvals import short

    assert short(PermissionError(errno.EACCES, "Permission denied", "/srv/countersign/files/acme/x")) == "Permission denied"


@pytest.mark.parametrize(
    "operation, path, why",
    [
        ("delete", "reports", "reports is a folder, and delete needs a file or link."),
        ("delete_folder", "notes.txt", "notes.txt is a file, and delete_folder needs a folder."),
        ("delete_folder", "", "Your whole folder cannot be deleted; name a folder inside it."),
        ("delete_folder", "reports/..", "Your whole folder cannot be deleted; name a folder inside it."),
        ("read", "reports", "reports is a folder, and read needs a file."),
    ],
)
def test_an_operation_on_the_wrong_kind_of_path_gets_no_card(app, alice, model, files, operation, path, why):
    model.enqueue(tool_call("manage_files", operation=operation, path=path))
    alice.say(alice.new_conversation(), "do it")
    assert f"Refused: {why}" in model.seen()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_reading_a_pipe_is_refused_instead_of_waiting_forever(app, alice, model, files):
    acme, _ = files
    os.mkfifo(acme / "pipe")
    model.enqueue(tool_call("manage_files", operation="read", path="pipe"))
    alice.say(alice.new_conversation(), "read the pipe")
    assert "Refused: pipe is not a regular file." in model.seen()
