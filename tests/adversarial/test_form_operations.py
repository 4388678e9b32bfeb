"""No form value turns a call into one that needs a card (issue 13, point 8; DESIGN §6.6): the
form offers only choices that need no card, and submit asks needs_card() again on the validated
input, whatever field and whatever channel the values came from."""

from __future__ import annotations

import re
import types
from typing import Literal

import pytest
import sqlalchemy as sa
from pydantic import BaseModel, Field

from app.copilot import engine
from app.copilot.actions import Action, Kind, Registry, expose, register
from app.copilot.kit import tool_call
from app.errors import ActionDeclarationError
from app.extensions import db
from app.models import Approval, AuditEvent

RAN: list[str] = []


@expose("files")
class TidyFiles(Action):
    """Tidy a folder of the workspace: list it, archive it, or purge it."""

    kind = Kind.WRITE
    ask_for_missing = True
    requires_approval = {"purge": "Purge every file in {folder}?"}

    class Input(BaseModel):
        operation: Literal["list", "archive", "purge"]
        folder: str = Field(max_length=50)

    def approval_values(self, ctx, input):
        return {"folder": f"the folder named {len(input.folder)} characters long"}

    def handle(self, ctx, input):
        RAN.append(f"{input.operation} {input.folder}")
        return f"{input.operation} done"


class GuardedTidy(TidyFiles):
    """Tidy a folder; anything under shared/ needs a card, whatever the operation."""

    @classmethod
    def needs_card(cls, input):
        return super().needs_card(input) or (input.folder or "").startswith("shared/")


@pytest.fixture
def tidy(app):
    """TidyFiles registered as discovery would (its start-time checks pass), on a clean slate."""
    RAN.clear()
    with app.app_context():
        registry = Registry()
        register(registry, TidyFiles, types.ModuleType("tests.tidy_files"))
        engine().registry.actions["tidy_files"] = registry.actions["tidy_files"]
        engine()._agent = None
    yield TidyFiles
    with app.app_context():
        engine().registry.actions.pop("tidy_files", None)
        engine()._agent = None


def ask_for_form(alice, model, **arguments):
    model.enqueue(tool_call("tidy_files", **arguments))
    html = alice.say(alice.new_conversation(), "tidy up")
    approval = re.findall(r'id="approval-([0-9a-f]{32})"', html)[-1]
    token = re.findall(r'name="token" value="([^"]+)"', html)[-1]
    return html, approval, token


def api_token(alice):
    (prompt,) = alice.client.get("/api/approvals?status=pending").get_json()["approvals"]
    return prompt


def offer_purge(app, approval):
    """Rewrite the stored form so that it offers purge (as a form stored before this rule would)."""
    from sqlalchemy.orm.attributes import flag_modified

    with app.app_context():
        row = db.session.get(Approval, approval)
        row.form["requestedSchema"]["properties"]["operation"]["oneOf"].append({"const": "purge", "title": "Purge"})
        flag_modified(row, "form")
        db.session.commit()


def status_of(app, approval):
    with app.app_context():
        return db.session.get(Approval, approval).status


def test_a_form_offers_only_the_operations_that_need_no_card(app, alice, model, tidy):
    html, _, _ = ask_for_form(alice, model, folder="old")
    assert '<option value="list">' in html and '<option value="archive">' in html
    assert 'value="purge"' not in html
    options = api_token(alice)["form"]["requestedSchema"]["properties"]["operation"]["oneOf"]
    assert [o["const"] for o in options] == ["list", "archive"]


def test_the_person_cannot_submit_a_card_operation_in_the_browser(app, alice, model, tidy):
    _, approval, token = ask_for_form(alice, model, folder="old")
    response = alice.htmx_post(f"/approvals/{approval}/submit", token=token, operation="purge", folder="old")
    assert response.status_code == 400 and "Not a valid choice" in response.get_data(as_text=True)
    assert RAN == [] and status_of(app, approval) == "pending"


def test_an_api_client_cannot_submit_a_card_operation(app, alice, model, tidy):
    _, approval, _ = ask_for_form(alice, model, folder="old")
    prompt = api_token(alice)
    response = alice.client.post(
        f"/api/approvals/{approval}/submit",
        headers={"X-CSRFToken": alice.csrf},
        json={"token": prompt["token"], "values": {"operation": "purge", "folder": "old"}},
    )
    assert response.status_code == 400 and response.get_json()["fields"] == {"operation": ["Not a valid choice."]}
    assert RAN == [] and status_of(app, approval) == "pending"


def test_submit_asks_needs_card_again_even_when_the_stored_form_offered_the_operation(app, alice, model, tidy):
    _, approval, token = ask_for_form(alice, model, folder="old")
    offer_purge(app, approval)  # a form stored before this rule, or a row someone rewrote
    response = alice.htmx_post(f"/approvals/{approval}/submit", token=token, operation="purge", folder="old")
    assert response.status_code == 400
    assert "need the person&#39;s confirmation on a card, which a form cannot give" in response.get_data(as_text=True)
    assert RAN == [] and status_of(app, approval) == "pending"
    with app.app_context():
        assert db.session.scalar(sa.select(AuditEvent.detail).where(AuditEvent.outcome == "refused_attempt")) == "form_needs_card"


def test_a_field_other_than_operation_that_makes_a_card_is_refused_at_submit(app, alice, model, tidy):
    with app.app_context():
        GuardedTidy.name, GuardedTidy.source = "tidy_files", __file__
        engine().registry.actions["tidy_files"] = GuardedTidy
    _, approval, token = ask_for_form(alice, model, folder="old")
    response = alice.htmx_post(f"/approvals/{approval}/submit", token=token, operation="archive", folder="shared/x")
    assert response.status_code == 400 and RAN == [] and status_of(app, approval) == "pending"
    assert alice.htmx_post(f"/approvals/{approval}/submit", token=token, operation="archive", folder="mine").status_code == 200
    assert RAN == ["archive mine"]


def test_every_channel_goes_through_the_same_check(app, alice, model, tidy):
    from app import copilot
    from app.copilot.approvals import Actor, sign
    from app.errors import FormInvalid
    from app.models import User

    _, approval, _ = ask_for_form(alice, model, folder="old")
    offer_purge(app, approval)
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        row = db.session.get(Approval, approval)
        for channel in ("mcp", "telegram", "api"):
            actor = Actor(user=user, binding=f"{channel}-binding", channel=channel)
            with pytest.raises(FormInvalid, match="which a form cannot give"):
                copilot.answer(approval, sign(row, actor.binding), actor, "submit", {"operation": "purge", "folder": "old"})
    assert RAN == [] and status_of(app, approval) == "pending"


def test_a_card_operation_given_by_the_model_with_a_field_missing_gets_no_form(app, alice, model, tidy):
    model.enqueue(tool_call("tidy_files", operation="purge"))
    alice.say(alice.new_conversation(), "purge")
    assert "Refused: tidy_files needs folder. Nothing was done." in model.seen()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_a_complete_card_operation_still_gets_its_card(app, alice, model, tidy):
    model.enqueue(tool_call("tidy_files", operation="purge", folder="old"))
    html = alice.say(alice.new_conversation(), "purge")
    assert "Purge every file in the folder named 3 characters long?" in html and RAN == []


def test_asking_when_every_operation_needs_a_card_fails_at_start():
    class AllCards(TidyFiles):
        requires_approval = {"list": "List?", "archive": "Archive?", "purge": "Purge?"}

    with pytest.raises(
        ActionDeclarationError,
        match=r"every operation needs a card, and a form never chooses one\. "
        r"Fix: remove ask_for_missing",
    ):
        register(Registry(), AllCards, types.ModuleType("tests.all_cards"))
