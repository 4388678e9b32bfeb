"""The contract check every risky action gets for free, and the start-time errors that teach."""

from __future__ import annotations

import pytest

from app.copilot.actions import discover
from app.copilot.kit import actions_contract_test
from app.errors import ActionDeclarationError
from tests.helpers.actions import cli_app

# The kit's parametrized contract test, over the demo's risky actions.
test_demo_actions_contract = actions_contract_test()


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


def test_queued_delivery_on_an_action_that_is_not_external_fails_at_start_naming_the_line():
    with pytest.raises(
        ActionDeclarationError,
        match=r"notify_team\.py:11: NotifyTeam: delivery = Delivery\.QUEUED on a write action: only an EXTERNAL "
        r"action's work goes out through a queue\. Fix: set kind = Kind\.EXTERNAL",
    ):
        discover("tests.fixtures.broken_delivery")


def queued_action(**attributes):
    """An EXTERNAL action with a card, declared with `attributes`."""
    from pydantic import BaseModel

    from app.copilot.actions import Action, Kind, expose

    class Input(BaseModel):
        to: str

    body = {"kind": Kind.EXTERNAL, "Input": Input, "reason": "Send it?", "handle": lambda self, ctx, input: "queued"}
    return expose("mail")(type("Notify", (Action,), {**body, **attributes}))


def test_queued_delivery_must_say_how_a_delivery_ends():
    import types

    from app.copilot.actions import Delivery, Registry, register

    with pytest.raises(ActionDeclarationError, match=r"delivery = Delivery\.QUEUED, but nothing says how a delivery ends\. "):
        register(Registry(), queued_action(delivery=Delivery.QUEUED), types.ModuleType("tests.notify"))


def test_a_deliver_that_nothing_would_call_fails_at_start():
    import types

    from app.copilot.actions import Registry, register

    with pytest.raises(ActionDeclarationError, match=r"it defines deliver\(\), which runs only for queued delivery"):
        register(Registry(), queued_action(deliver=lambda self, ctx, input: "sent"), types.ModuleType("tests.notify"))


def test_a_queued_external_action_with_its_deliver_is_registered():
    import types

    from app.copilot.actions import Delivery, Registry, register

    registry = Registry()
    action = queued_action(delivery=Delivery.QUEUED, deliver=lambda self, ctx, input: "sent")
    register(registry, action, types.ModuleType("tests.notify"))
    assert registry.actions["notify"].delivery is Delivery.QUEUED
