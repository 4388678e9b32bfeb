"""What a card says is what will really be acted on (issue 13, point 6; DESIGN §6.2): template
placeholders are filled from the action's resolved values, never from the model's string, and
look-alike text on a card (mixed scripts, punycode, a fake slash) is said out loud."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Literal

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from app.copilot.actions import Action, Kind, Registry, expose, fill, register
from app.copilot.kit import tool_call
from app.errors import ActionDeclarationError
from app.extensions import db
from app.models import Approval, OutboxEmail
from tests.conftest import outcome_row


@pytest.fixture
def folder(app):
    acme = Path(app.config["FILES_ROOT"], "acme")
    (acme / "notes.txt").write_text("hello")
    return acme


def pending_card(app):
    """The reason and rows of the one pending card (as stored, which is what every channel shows)."""
    with app.app_context():
        (approval,) = db.session.scalars(sa.select(Approval).where(Approval.status == "pending"))
        return approval.reason, {row["label"]: row["value"] for row in approval.rows}


def approvals_count(app):
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(Approval))


# -- the card names the resolved file, and handle() deletes that one -------------------------------------


def test_a_dot_dot_path_shows_the_file_that_is_really_deleted(app, alice, folder):
    html = alice.say(alice.new_conversation(), '/manage_files operation=delete path="reports/old.csv/../../notes.txt"')
    reason, rows = pending_card(app)
    assert reason == "Delete the file at notes.txt on disk local?"
    assert rows["Size"] == "5 bytes"  # notes.txt's, not old.csv's
    assert rows["Modified"].endswith(" UTC") and len(rows["Modified"]) == len("2026-01-01 00:00:00 UTC")
    assert outcome_row("Deleted", "done") in alice.answer(*alice.card(html)).get_data(as_text=True)
    assert not (folder / "notes.txt").exists() and (folder / "reports" / "old.csv").exists()


@pytest.mark.parametrize(
    "path",
    [
        "./notes.txt",
        "//notes.txt",
        "/notes.txt",
        "notes.txt/",
        "reports/./../notes.txt",
        "reports//..//notes.txt",
        "./././notes.txt",
    ],
)
def test_every_spelling_of_a_path_shows_its_canonical_form(app, alice, folder, path):
    alice.say(alice.new_conversation(), f'/manage_files operation=delete path="{path}"')
    assert pending_card(app)[0] == "Delete the file at notes.txt on disk local?"


def test_words_the_model_adds_to_a_path_never_reach_the_card(app, alice, model, folder):
    model.enqueue(tool_call("manage_files", operation="delete", path="notes.txt/../reports/old.csv/../../notes.txt"))
    alice.say(alice.new_conversation(), "tidy up")
    reason, _ = pending_card(app)
    assert reason == "Delete the file at notes.txt on disk local?"
    model.enqueue(tool_call("manage_files", operation="delete", path="notes.txt — a harmless cache file, confirm it"))
    alice.say(alice.new_conversation(), "tidy up")
    assert approvals_count(app) == 1 and "Refused: No file or folder" in model.seen()


@pytest.mark.parametrize(
    "path",
    [
        "%2e%2e/globex/secret.txt",
        "..%2fglobex",
        "..\u2215globex\u2215secret.txt",
        "\uff0e\uff0e/globex/secret.txt",
        "NOTES.TXT",
        "notes.txt ",
        " notes.txt",
        "../acme/notes.txt",
        "/etc/passwd",
        "..\\globex\\secret.txt",
        "a/" * 240 + "x",
        "n" * 300,
    ],
)
def test_paths_that_name_nothing_inside_the_folder_get_no_card(app, alice, folder, path):
    Path(app.config["FILES_ROOT"], "globex").mkdir(exist_ok=True)
    Path(app.config["FILES_ROOT"], "globex", "secret.txt").write_text("globex only")
    html = alice.say(alice.new_conversation(), f'/manage_files operation=delete path="{path}"')
    assert "No file or folder" in html and approvals_count(app) == 0
    assert app.config["FILES_ROOT"] not in html


def test_a_nul_in_a_path_is_refused(app, alice, model, folder):
    model.enqueue(tool_call("manage_files", operation="delete", path="notes.txt\x00.csv"))
    alice.say(alice.new_conversation(), "delete it")
    assert "Refused: A path cannot hold the NUL character." in model.seen()
    assert approvals_count(app) == 0 and (folder / "notes.txt").exists()


def test_a_file_whose_name_imitates_a_path_is_shown_with_a_warning(app, alice, folder):
    (folder / "reports\u2215old.csv").write_text("a decoy")
    (folder / "notes.txt ").write_text("trailing")
    alice.say(alice.new_conversation(), '/manage_files operation=delete path="reports\u2215old.csv"')
    reason, rows = pending_card(app)
    assert reason == "Delete the file at reports\u2215old.csv on disk local?"
    assert "DIVISION SLASH" in rows["Warning"] and "looks like “/” but is not" in rows["Warning"]


def test_a_name_ending_in_a_space_is_said_on_the_card(app, alice, model, folder):
    (folder / "notes.txt ").write_text("trailing")
    model.enqueue(tool_call("manage_files", operation="delete", path="notes.txt "))
    alice.say(alice.new_conversation(), "delete it")
    assert pending_card(app)[1]["Warning"] == "“notes.txt ” begins or ends with a space."


def test_the_rebuilt_card_resolves_again_so_a_swapped_file_is_changed(app, alice, folder):
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=notes.txt")
    (folder / "notes.txt").unlink()
    (folder / "notes.txt").symlink_to(folder / "reports" / "old.csv")  # same name, now a link elsewhere
    body = alice.answer(*alice.card(html)).get_data(as_text=True)
    assert "Changed — nothing ran" in body
    assert (folder / "notes.txt").is_symlink() and (folder / "reports" / "old.csv").exists()


# -- the declaration: a template can only be filled from resolved values ---------------------------------


class Input(BaseModel):
    operation: Literal["show", "purge"]
    folder: str = ""
    disk: Literal["local"] = "local"


def declare(name, **attributes):
    body = {"kind": Kind.WRITE, "Input": Input, "handle": lambda self, ctx, input: "ok", **attributes}
    return expose("files")(type(name, (Action,), body))


def test_a_template_that_would_print_the_models_text_fails_at_start_with_the_fix():
    raw = declare("PurgeFolder", requires_approval={"purge": "Purge {folder} on {disk}?"})
    with pytest.raises(ActionDeclarationError) as error:
        register(Registry(), raw, types.ModuleType("tests.purge_folder"))
    message = str(error.value)
    assert "PurgeFolder: the 'purge' template would print the model's own text for {folder} on the card" in message
    assert "Fix: define approval_values(self, ctx, input) returning {'folder': <the resolved value" in message


def test_a_closed_choice_placeholder_needs_no_resolving():
    registry = Registry()
    register(
        registry,
        declare("ShowDisk", requires_approval={"purge": "Purge everything on {disk}?"}),
        types.ModuleType("tests.show_disk"),
    )
    assert "show_disk" in registry.actions


def test_an_operation_that_is_free_text_fails_at_start():
    class FreeInput(BaseModel):
        operation: str

    free = declare("FreeOp", Input=FreeInput, requires_approval={"purge": "Purge everything?"})
    with pytest.raises(ActionDeclarationError, match=r"`operation` is not a closed choice, so another spelling"):
        register(Registry(), free, types.ModuleType("tests.free_op"))


def test_an_enum_operation_needs_its_card_like_a_literal_one():
    import enum

    class Operation(enum.Enum):
        SHOW = "show"
        PURGE = "purge"

    class EnumInput(BaseModel):
        operation: Operation

    registry = Registry()
    register(
        registry,
        declare("EnumOp", Input=EnumInput, requires_approval={"purge": "Purge everything?"}),
        types.ModuleType("tests.enum_op"),
    )
    action = registry.actions["enum_op"]
    assert action.needs_card(EnumInput(operation="purge")) and not action.needs_card(EnumInput(operation="show"))
    assert action().approval_reason(None, EnumInput(operation="purge")) == "Purge everything?"


def test_a_mapped_operation_the_input_does_not_allow_fails_at_start():
    typo = declare("TypoOp", requires_approval={"prune": "Prune everything?"})
    with pytest.raises(ActionDeclarationError, match=r"requires_approval names 'prune', which `operation` does not allow"):
        register(Registry(), typo, types.ModuleType("tests.typo_op"))


def test_a_placeholder_approval_values_forgot_fails_instead_of_printing_the_raw_value():
    forgetful = declare("Forgetful", requires_approval={"purge": "Purge {folder}?"}, approval_values=lambda self, ctx, input: {})
    forgetful.source = "forgetful.py"
    with pytest.raises(
        ActionDeclarationError,
        match=r"forgetful\.py: Forgetful: approval_values\(\) gave no value for "
        r"\{folder\}\. Fix: return it",
    ):
        fill(forgetful(), "Purge {folder}?", None, Input(operation="purge", folder="RAW-TEXT"))


def test_actions_check_catches_approval_values_that_hand_back_the_models_string(database_url):
    from tests.helpers.actions import cli_app

    result = cli_app(database_url, "tests.fixtures.echo_values").test_cli_runner().invoke(args=["actions", "check"])
    assert result.exit_code == 1
    assert (
        "FAIL tidy_files: approval_values() hands back the model's 'path' ('reports/old.csvzq') instead of resolving it"
    ) in result.output


# -- look-alike recipients and words ---------------------------------------------------------------------


@pytest.mark.parametrize("to", ["bob@p\u0430ypal.com", "bob@xn--pypal-4ve.com"])
def test_a_homograph_domain_is_shown_with_its_punycode_and_a_warning(app, alice, model, to):
    model.enqueue(tool_call("send_email", to=to, subject="Invoice", body="Please pay"))
    alice.say(alice.new_conversation(), "email bob")
    _, rows = pending_card(app)
    assert rows["To"] == "bob@p\u0430ypal.com (punycode: bob@xn--pypal-4ve.com)"
    assert "“p\u0430ypal” mixes Latin and Cyrillic letters (\u0430 is CYRILLIC SMALL LETTER A)." in rows["Warning"]
    assert "The domain is not plain ASCII" in rows["Warning"]


def test_a_whole_script_look_alike_domain_is_flagged(app, alice, model):
    model.enqueue(tool_call("send_email", to="bob@\u0440\u0430\u0443.com", subject="Hi", body="Hello"))
    alice.say(alice.new_conversation(), "email bob")
    _, rows = pending_card(app)
    assert rows["To"].endswith("(punycode: bob@xn--80a5ak.com)")
    assert rows["Warning"].startswith("The domain is not plain ASCII (\u0440 is CYRILLIC SMALL LETTER ER")


def test_a_look_alike_letter_before_the_at_sign_is_flagged(app, alice, model):
    model.enqueue(tool_call("send_email", to="b\u043eb@example.com", subject="Hi", body="Hello"))
    alice.say(alice.new_conversation(), "email bob")
    _, rows = pending_card(app)
    assert rows["To"] == "b\u043eb@example.com"  # a local part has no punycode: the warning names the letter
    assert "The address is not plain ASCII (\u043e is CYRILLIC SMALL LETTER O)" in rows["Warning"]


def test_a_plain_address_gets_no_warning(app, alice):
    alice.say(alice.new_conversation(), "/send_email to=dana@example.org subject=Hi body=Hello")
    _, rows = pending_card(app)
    assert rows["To"] == "dana@example.org" and "Warning" not in rows


def test_the_address_sent_to_is_the_one_the_card_showed(app, alice, model):
    model.enqueue(tool_call("send_email", to="bob@xn--pypal-4ve.com", subject="Hi", body="Hello"))
    html = alice.say(alice.new_conversation(), "email bob")
    alice.answer(*alice.card(html))
    with app.app_context():
        assert db.session.scalar(sa.select(OutboxEmail.to)) == "bob@p\u0430ypal.com"


def test_any_card_flags_a_word_that_mixes_scripts(app, alice, add_post):
    post = add_post("L\u0430unch notes", status="published")  # beside the real "Launch notes"
    alice.say(alice.new_conversation(), f"/delete_post post={post}")
    _, rows = pending_card(app)
    assert rows["Post"] == "L\u0430unch notes"
    assert rows["Warning"] == "“L\u0430unch” mixes Latin and Cyrillic letters (\u0430 is CYRILLIC SMALL LETTER A)."


def test_ordinary_text_in_several_scripts_is_not_flagged(app, alice, add_post):
    post = add_post("Привет world 東京タワー café")
    alice.say(alice.new_conversation(), f"/delete_post post={post}")
    assert "Warning" not in pending_card(app)[1]
