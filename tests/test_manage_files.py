"""A multi-operation tool: operations in requires_approval get a card, the others run at once."""

from __future__ import annotations

import pytest

from tests.conftest import outcome_row


@pytest.fixture
def app_config(tmp_path):
    return {"FILES_ROOT": str(tmp_path / "files")}


@pytest.fixture
def folder(app):
    root = app.config["FILES_ROOT"]
    from pathlib import Path

    acme = Path(root, "acme")
    (acme / "reports").mkdir(parents=True, exist_ok=True)  # the demo seed made it
    (acme / "reports" / "old.csv").write_text("a,b\n1,2\n")
    (acme / "notes.txt").write_text("hello")
    Path(root, "globex").mkdir()
    (Path(root, "globex") / "secret.txt").write_text("globex only")
    return acme


def test_delete_shows_the_filled_template_and_deletes_only_after_confirm(alice, folder):
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=reports/old.csv")
    assert "Delete the file at reports/old.csv on disk local?" in html
    assert "<dt>Size</dt><dd>8 bytes</dd>" in html
    assert (folder / "reports" / "old.csv").exists()
    response = alice.answer(*alice.card(html))
    assert outcome_row("Deleted", "done") in response.get_data(as_text=True)
    assert not (folder / "reports" / "old.csv").exists()


def test_list_and_read_run_at_once(alice, folder):
    convo = alice.new_conversation()
    listed = alice.say(convo, "/manage_files operation=list")
    assert "reports/old.csv" in listed and "notes.txt" in listed and 'name="token"' not in listed
    assert "hello" in alice.say(convo, "/manage_files operation=read path=notes.txt")


def test_delete_folder_needs_a_card_too(alice, folder):
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete_folder path=reports")
    assert "Delete the folder reports and everything in it on disk local?" in html
    alice.answer(*alice.card(html), "decline")
    assert (folder / "reports" / "old.csv").exists()


def test_a_file_changed_after_the_card_is_not_deleted(alice, folder):
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=reports/old.csv")
    (folder / "reports" / "old.csv").write_text("new contents, much longer\n")
    body = alice.answer(*alice.card(html)).get_data(as_text=True)
    assert "Changed — nothing ran" in body
    assert (folder / "reports" / "old.csv").exists()


@pytest.mark.parametrize("path", ["../globex/secret.txt", "/../globex/secret.txt", "reports/../../globex"])
def test_paths_outside_the_tenants_folder_are_not_found(alice, folder, path):
    html = alice.say(alice.new_conversation(), f'/manage_files operation=read path="{path}"')
    assert "globex only" not in html and "No file or folder" in html


@pytest.mark.parametrize("extra, said", [(0, "the 1 item in it"), (1, "the 2 items in it")])
def test_a_folder_delete_counts_its_items_in_good_english(alice, sign_in, model, folder, extra, said):
    from tests.helpers.countersign import both_signatures

    for n in range(extra):
        (folder / "reports" / f"more{n}.csv").write_text("x")
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete_folder path=reports")
    both_signatures(alice, sign_in("admin@example.com"), html)
    assert f"Deleted the folder reports and {said}." in model.seen()
