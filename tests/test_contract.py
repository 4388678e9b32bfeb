"""The contract check every risky action gets for free, and the start-time errors that teach."""

from __future__ import annotations

import pytest

from app import create_app
from app.copilot.discovery import discover
from app.copilot.testing import actions_contract_test
from app.errors import ActionDeclarationError

# The kit's parametrized contract test, over the demo's risky actions.
test_demo_actions_contract = actions_contract_test()


def cli_app(database_url, package):
    return create_app(
        {
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "k",
            "SWEEP_ON_START": False,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "ACTIONS_PACKAGE": package,
        }
    )


def test_actions_check_passes_on_the_demo_actions(database_url):
    result = cli_app(database_url, "app.actions").test_cli_runner().invoke(args=["actions", "check"])
    assert result.exit_code == 0, result.output
    assert "ok   delete_post" in result.output and "ok   send_email" in result.output


def test_actions_check_fails_clearly_on_a_card_that_echoes_an_argument(database_url):
    result = cli_app(database_url, "tests.fixtures.echo_card").test_cli_runner().invoke(args=["actions", "check"])
    assert result.exit_code == 1
    assert (
        "FAIL archive_note: the card shows the model's argument 'title' ('Grocerieszq'); build the card "
        "from your own records, or declare shows = ('title',) if the person must see it" in result.output
    )


def test_unknown_placeholder_fails_at_start_naming_file_line_and_fix():
    with pytest.raises(ActionDeclarationError) as error:
        discover("tests.fixtures.broken_placeholder")
    assert (
        "purge_disk.py:13: PurgeDisk: the 'purge' template names {folder}, which Input does not have "
        "(fields: disk, operation). Fix: use only Input's field names as placeholders" in str(error.value)
    )


def test_destructive_without_toolset_names_the_line():
    with pytest.raises(
        ActionDeclarationError,
        match=r"wipe_disk\.py:6: WipeDisk: a destructive action must be "
        r"exposed through a named toolset\. Fix: decorate it",
    ):
        discover("tests.fixtures.broken_no_toolset")


def test_input_not_a_model_names_the_line():
    with pytest.raises(ActionDeclarationError, match=r"greet\.py:8: Greet: Input is not a pydantic model\. Fix:"):
        discover("tests.fixtures.broken_input")
