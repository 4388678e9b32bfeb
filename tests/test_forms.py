"""Forms for what the model left out (DESIGN §3.2): values reach handle() only."""

from __future__ import annotations

import logging
import re

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from app.copilot import engine
from app.copilot.actions import Action, Kind, elicitation, register
from app.copilot.kit import text as text_part
from app.copilot.kit import tool_call
from app.extensions import db
from app.models import Approval, AuditEvent, Message, Post, Run
from tests.conftest import outcome_row
from tests.helpers.cards import form_of, submit

CANARY = "CANARY-f0rm-51e"
FORM_TYPES = {"string", "number", "integer", "boolean"}
FORM_KEYS = {
    "type",
    "title",
    "description",
    "default",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "oneOf",
    "enum",
    "enumNames",
}


def test_missing_fields_give_a_form_with_the_given_ones_filled(alice):
    html = alice.say(alice.new_conversation(), '/draft_post title="Launch notes"')
    assert "A few details for your post." in html
    assert re.search(r'name="title"[^>]*value="Launch notes"', html)
    assert re.search(r'<textarea[^>]*name="body"', html)
    assert '<option value="draft">Draft</option>' in html
    assert 'rows="None"' not in html and re.search(r'<textarea[^>]*rows="5"', html)


def test_a_field_the_model_filled_holds_what_the_person_reads(alice, model):
    """The model's value, pre-filled: hidden characters (a U+202E shows "troper" as "report")
    are left out of the field, so what the person reads there is what Submit sends."""
    model.enqueue(tool_call("draft_post", title="Quarterly \u202etroper\u202c\u3164 notes\U000e0101"))
    html = alice.say(alice.new_conversation(), "write a post")
    assert re.search(r'name="title"[^>]*value="Quarterly troper notes"', html), html
    assert "\u202e" not in html and "\u3164" not in html


def test_through_the_api_the_form_shows_and_keeps_the_text_without_hidden_characters(app, model):
    """The same on the API (and MCP, which sends the same elicitation): the default shown is the
    text without hidden characters, and an answer that keeps it stores what was shown."""
    from app.auth import create_token
    from app.models import User
    from tests.conftest import api_headers

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(alice, scope="client"))
    client = app.test_client()
    convo = client.post("/api/conversations", headers=headers).get_json()["id"]
    model.enqueue(tool_call("draft_post", title="Quarterly \u202etroper\u202c notes"))
    answer = client.post(f"/api/conversations/{convo}/messages", json={"text": "write a post"}, headers=headers).get_json()
    [form] = answer["pending"]
    assert form["form"]["requestedSchema"]["properties"]["title"]["default"] == "Quarterly troper notes"
    model.enqueue(text_part("Saved."))
    kept = {"token": form["token"], "values": {"body": "b", "status": "draft"}}  # the title as shown
    assert client.post(f"/api/approvals/{form['id']}/submit", json=kept, headers=headers).status_code == 200
    with app.app_context():
        assert db.session.scalar(sa.select(Post.title).order_by(Post.id.desc()).limit(1)) == "Quarterly troper notes"


def test_submit_runs_handle_and_the_model_learns_only_field_names(app, alice, model, caplog):
    caplog.set_level(logging.DEBUG)
    model.enqueue(tool_call("draft_post", title="Launch notes"))
    convo = alice.new_conversation()
    approval, token = form_of(alice.say(convo, "write a post"))
    response = submit(alice, approval, token, title="Launch notes", body=f"Body {CANARY}", status="draft")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "filled in: title, body, status" in html
    assert CANARY not in html
    with app.app_context():
        post = db.session.scalar(sa.select(Post).where(Post.title == "Launch notes", Post.body.contains(CANARY)))
        assert post is not None and post.status == "draft"
        stored = [
            *db.session.scalars(sa.select(Run.history)),
            *db.session.scalars(sa.select(Message.text)),
            *(f"{e.event} {e.outcome} {e.detail}" for e in db.session.scalars(sa.select(AuditEvent))),
            *(repr(a.arguments) + repr(a.form) + (a.result or "") for a in db.session.scalars(sa.select(Approval))),
        ]
    assert stored and not any(CANARY in text for text in stored)
    assert CANARY not in model.seen()
    assert "The person filled in: title, body, status." in model.seen()
    assert CANARY not in caplog.text


def test_decline_and_not_now_run_nothing_and_say_so_differently(app, alice, model):
    convo = alice.new_conversation()
    model.enqueue(tool_call("draft_post", title="A"))
    first = form_of(alice.say(convo, "write"))
    assert outcome_row("Declined", "declined") in alice.answer(*first, "decline").get_data(as_text=True)
    model.enqueue(tool_call("draft_post", title="B"))
    second = form_of(alice.say(convo, "write"))
    assert "Set aside — nothing ran" in alice.answer(*second, "cancel").get_data(as_text=True)
    seen = model.seen()
    assert "The person declined. Nothing was done." in seen
    assert "The person set this aside for now (Not now)." in seen
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post).where(Post.title.in_(["A", "B"]))) == 0


@pytest.mark.parametrize(
    "values, field, message",
    [
        ({"title": "T", "body": "B", "status": "archived"}, "status", "Not a valid choice"),
        ({"title": "x" * 201, "body": "B", "status": "draft"}, "title", "longer than 200"),
        ({"title": "T", "body": "", "status": "draft"}, "body", "This field is required."),
    ],
)
def test_bad_values_show_field_errors_and_run_nothing(app, alice, values, field, message):
    approval, token = form_of(alice.say(alice.new_conversation(), "/draft_post"))
    response = submit(alice, approval, token, **values)
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    errors = re.findall(rf'id="f-{approval}-{field}-error">([^<]*)<', html)
    assert errors and message in errors[0]
    if values["title"] == "T":
        assert re.search(r'name="title"[^>]*value="T"', html)  # what was typed is kept
    with app.app_context():
        assert db.session.get(Approval, approval).status == "pending"
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post)) == 2  # the demo's two


def test_wrong_type_in_the_api_is_400_with_the_field(app, alice):
    html = alice.say(alice.new_conversation(), "/draft_post")
    approval, _ = form_of(html)
    token = alice.client.get("/api/approvals?status=pending", headers={"X-CSRFToken": alice.csrf}).get_json()["approvals"][0][
        "token"
    ]
    response = alice.client.post(
        f"/api/approvals/{approval}/submit",
        headers={"X-CSRFToken": alice.csrf},
        json={"token": token, "values": {"title": {"nested": 1}, "body": "b", "status": "draft"}},
    )
    assert response.status_code == 400
    assert response.get_json()["fields"] == {"title": ["Give a single value."]}


def test_second_submit_after_success_is_409(app, alice):
    approval, token = form_of(alice.say(alice.new_conversation(), "/draft_post"))
    assert submit(alice, approval, token, title="T", body="B", status="draft").status_code == 200
    assert submit(alice, approval, token, title="T2", body="B2", status="draft").status_code == 409
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post).where(Post.title.in_(["T", "T2"]))) == 1


def test_destructive_call_missing_a_field_is_refused_and_no_form_is_made(app, alice, model):
    model.enqueue(tool_call("delete_post"))
    alice.say(alice.new_conversation(), "delete something")
    assert "Refused: delete_post needs post." in model.seen()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


class SetApiKey(Action):
    """Store an API key for a service."""

    kind = Kind.WRITE
    ask_for_missing = True

    class Input(BaseModel):
        service: str
        api_key: SecretStr

    def handle(self, ctx, input):
        return "stored"


def sneak_in(app, action):
    """Register an action past the start-time checks (as code that adds one at run time would)."""
    with app.app_context():
        action.name, action.source = "set_api_key", __file__
        engine().registry.actions[action.name] = action
        engine()._agent = None


def test_a_form_never_asks_for_a_secret(app, alice, model):
    sneak_in(app, SetApiKey)
    model.enqueue(tool_call("set_api_key", service="github"))
    alice.say(alice.new_conversation(), "store my key")
    assert "Refused: set_api_key needs api_key, which is a secret" in model.seen()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_every_demo_requested_schema_is_flat_primitives(app):
    with app.app_context():
        actions = engine().registry.actions.values()
    for action in actions:
        schema = elicitation(action.Input, "m")["requestedSchema"]
        assert schema["type"] == "object" and set(schema) == {"type", "properties", "required"}
        assert set(schema["required"]) <= set(schema["properties"])
        for name, prop in schema["properties"].items():
            assert prop["type"] in FORM_TYPES, (action.name, name)
            assert set(prop) <= FORM_KEYS, (action.name, name, set(prop) - FORM_KEYS)
            if "format" in prop:
                assert prop["format"] in {"email", "uri", "date", "date-time"}
            for option in prop.get("oneOf", []):
                assert set(option) == {"const", "title"} and isinstance(option["const"], str)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=300)
    | st.sampled_from(["x" * 50_000, "\u202e\u200bdraft", "draft\x00", "NaN"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


# too_slow times the data's generation: a loaded machine is slow, not wrong.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(["title", "body", "status", "other"]), json_values, max_size=4))
def test_random_submissions_never_500(app, alice, values):
    app.config["APPROVALS_MAX_PENDING_PER_PERSON"] = 1000  # a refused submit leaves its form pending
    approval, _ = form_of(alice.say(alice.new_conversation(), "/draft_post"))
    token = alice.client.get("/api/approvals?status=pending", headers={"X-CSRFToken": alice.csrf}).get_json()["approvals"][0][
        "token"
    ]
    response = alice.client.post(
        f"/api/approvals/{approval}/submit", headers={"X-CSRFToken": alice.csrf}, json={"token": token, "values": values}
    )
    assert response.status_code in (200, 400), response.get_data(as_text=True)


def test_actions_command_flags_an_action_that_would_ask_for_a_secret(app):
    sneak_in(app, SetApiKey)
    out = app.test_cli_runner().invoke(args=["actions"]).output
    line = next(row for row in out.splitlines() if row.startswith("set_api_key"))
    assert "! secret api_key" in line


def test_an_action_that_would_ask_for_a_secret_fails_at_start():
    import types

    from app.copilot.actions import Registry
    from app.errors import ActionDeclarationError

    with pytest.raises(ActionDeclarationError, match=r"api_key is a secret, which a form never asks for.*Fix:"):
        register(Registry(), SetApiKey, types.ModuleType("tests.set_api_key"))


def test_a_schema_that_cannot_be_a_form_fails_at_start_naming_the_field():
    from app.copilot.actions import discover
    from app.errors import ActionDeclarationError

    with pytest.raises(ActionDeclarationError) as error:
        discover("tests.fixtures.broken_form")
    assert "tag_post.py" in str(error.value) and "field 'tags'" in str(error.value) and "Fix:" in str(error.value)


def test_api_prompt_carries_the_mcp_form_object(alice):
    alice.say(alice.new_conversation(), '/draft_post title="Launch notes"')
    (prompt,) = alice.client.get("/api/approvals?status=pending").get_json()["approvals"]
    assert prompt["type"] == "form"
    assert prompt["form"]["message"] == "A few details for your post."
    schema = prompt["form"]["requestedSchema"]
    assert schema["required"] == ["title", "body", "status"]
    assert schema["properties"]["title"]["default"] == "Launch notes"
    assert prompt["rows"] == []


def test_an_expired_form_runs_nothing_and_the_model_is_told(app, alice, model):
    from datetime import timedelta

    import time_machine

    from app.models import utcnow

    with time_machine.travel(utcnow(), tick=False) as clock:
        model.enqueue(tool_call("draft_post", title="Late"))
        approval, token = form_of(alice.say(alice.new_conversation(), "write"))
        clock.shift(timedelta(seconds=app.config["APPROVALS_TTL"] + 1))
        response = submit(alice, approval, token, title="Late", body="B", status="draft")
    assert response.status_code == 410
    assert "The card expired before the person answered." in model.seen()
    with app.app_context():
        assert db.session.get(Approval, approval).status == "expired"
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post).where(Post.title == "Late")) == 0


class Subscribe(Action):
    """Subscribe to a newsletter."""

    kind = Kind.WRITE
    ask_for_missing = True

    class Input(BaseModel):
        topic: str
        weekly: bool = True

    def handle(self, ctx, input):
        return f"weekly={input.weekly}"


def test_an_unticked_checkbox_in_the_browser_means_false(app, alice, model):
    with app.app_context():
        Subscribe.name, Subscribe.source = "subscribe", __file__
        engine().registry.actions["subscribe"] = Subscribe
        engine()._agent = None
    model.enqueue(tool_call("subscribe", weekly=True))
    approval, token = form_of(alice.say(alice.new_conversation(), "subscribe me"))
    model.enqueue(text_part("ok"))
    submit(alice, approval, token, topic="news")  # the checkbox was unticked: not sent
    assert "weekly=False" in model.seen()
