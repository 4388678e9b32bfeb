"""Fuzzing: schemathesis against /api/openapi.json, and hypothesis over every POST endpoint the app
has (web forms, API, admin, connector webhooks), as anyone, as a signed-in person and with a bearer
token, with real and made-up ids, tokens, bodies and signatures: whatever arrives, never a 5xx."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import time
from typing import Any

import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.routing import AnyConverter, IntegerConverter

from app.api.openapi import document as openapi_document
from app.auth import create_token
from app.extensions import db
from app.models import User
from tests.conftest import Person
from tests.fake_chat import FakeChatApi, FakeSmtp, connector_config

SECRETS = {"TELEGRAM_WEBHOOK_SECRET": "fuzz-telegram", "SLACK_SIGNING_SECRET": "fuzz-slack", "EMAIL_WEBHOOK_SECRET": "fuzz-email"}
# More for a deeper run: COUNTERSIGN_FUZZ_EXAMPLES=2000 ./scripts/test tests/adversarial/test_fuzz.py
FUZZ = settings(
    max_examples=int(os.environ.get("COUNTERSIGN_FUZZ_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def services():
    """A fuzzed webhook from an unknown sender is answered in its thread: the platform's API and
    the mail server are local fakes (no test reaches the internet; a refused call would be a 500)."""
    api, smtp = FakeChatApi(), FakeSmtp()
    yield api, smtp
    api.close()
    smtp.close()


@pytest.fixture
def app_config(services):
    chat = connector_config(*services)
    return {**chat, **SECRETS, "TURNS_RUNNER": "inline", "EVENTS_STREAM_SECONDS": 1}  # a stream ends (a client reconnects)


def token_of(app, email: str) -> str:
    with app.app_context():
        return create_token(db.session.scalar(sa.select(User).where(User.email == email)), scope="client")


# --- schemathesis: every operation of the published API ------------------------------------------


def test_the_published_document_is_what_the_app_serves(app):
    assert app.test_client().get("/api/openapi.json").get_json() == openapi_document()


api = schemathesis.openapi.from_dict(openapi_document())  # (its pytest fixture loader fails on pytest 9)


@api.parametrize()
@FUZZ
def test_the_api_never_answers_5xx(case, app):
    response = case.call(app=app, headers={"Authorization": f"Bearer {token_of(app, 'admin@example.com')}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.status_code, response.text[:500])


# --- hypothesis: every POST route of the app ------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "text",
    "token",
    "email",
    "password",
    "csrf_token",
    "title",
    "body",
    "post",
    "to",
    "subject",
    "reason",
    "update_id",
    "message",
    "event",
    "type",
    "from",
    "challenge",
]


def webhook_shapes() -> st.SearchStrategy[dict[str, Any]]:
    """Bodies shaped like what each chat service sends, with any value in any place."""
    text = st.text(max_size=60) | st.sampled_from(["yes", "no", "/delete_post post=1", "/draft_post"])
    person = st.fixed_dictionaries({"id": st.integers() | st.text(max_size=8) | JSON})
    telegram = st.fixed_dictionaries(
        {
            "update_id": st.integers() | JSON,
            "message": st.fixed_dictionaries(
                {"message_id": st.integers() | JSON, "from": person | JSON, "chat": person | JSON, "text": text | JSON}
            ),
        }
    )
    slack = st.fixed_dictionaries(
        {
            "type": st.sampled_from(["event_callback", "url_verification"]) | JSON,
            "challenge": JSON,
            "event": st.fixed_dictionaries(
                {
                    "type": st.just("message") | JSON,
                    "user": JSON,
                    "text": text | JSON,
                    "channel": JSON,
                    "ts": JSON,
                    "thread_ts": JSON,
                    "bot_id": JSON,
                }
            ),
        }
    )
    email = st.fixed_dictionaries(
        {
            "from": st.text(max_size=40) | JSON,
            "subject": JSON,
            "text": text | JSON,
            "message_id": JSON,
            "references": JSON,
            "in_reply_to": JSON,
        }
    )
    return telegram | slack | email


def signed(path: str, body: bytes, headers: dict[str, str], sign: bool) -> dict[str, str]:
    """Add the connector's real signature when `sign`, a wrong one otherwise."""
    secret = SECRETS[
        "TELEGRAM_WEBHOOK_SECRET" if "telegram" in path else "SLACK_SIGNING_SECRET" if "slack" in path else "EMAIL_WEBHOOK_SECRET"
    ]
    key = secret.encode() if sign else b"wrong"
    stamp = str(int(time.time()))
    return {
        **headers,
        "X-Telegram-Bot-Api-Secret-Token": secret if sign else "wrong",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + hmac.new(key, f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest(),
        "X-Countersign-Timestamp": stamp,
        "X-Countersign-Signature": "sha256=" + hmac.new(key, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest(),
    }


@pytest.fixture
def known(app, alice):
    """Real ids and tokens to mix with made-up ones: a conversation, a confirm card and a form."""
    convo = alice.new_conversation()
    with app.app_context():
        from app.models import Post

        post = db.session.scalar(sa.select(Post.id))
    card = alice.card(alice.say(convo, f"/delete_post post={post}"))
    form_html = alice.say(convo, "/draft_post")
    form = (
        re.findall(r'id="approval-([0-9a-f]{32})"', form_html)[-1],
        re.findall(r'name="token" value="([^"]+)"', form_html)[-1],
    )
    return {"conversation": convo, "approvals": [card, form]}


def test_every_post_endpoint_never_answers_5xx(app, known, sign_in):
    rules = sorted((r for r in app.url_map.iter_rules() if "POST" in r.methods), key=lambda r: r.rule)
    assert len(rules) >= 15  # every POST route of the app, found from its URL map, not listed here
    people = {"alice": sign_in("alice@example.com")}
    bearer = token_of(app, "alice@example.com")
    ids = [a for a, _ in known["approvals"]]
    tokens = [t for _, t in known["approvals"]]

    def path_value(name: str, converter: Any) -> st.SearchStrategy[Any]:
        if isinstance(converter, AnyConverter):
            return st.sampled_from(sorted(converter.items))
        if isinstance(converter, IntegerConverter):
            return st.sampled_from([known["conversation"], 0, 2**31, 2**63, 10**30]) | st.integers(0, 10**6)
        return st.sampled_from(ids) | st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=40)

    def form_values() -> st.SearchStrategy[dict[str, str]]:
        value = st.text(max_size=80) | st.sampled_from(tokens + ["yes", "demo", "alice@example.com"])
        return st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=10), value, max_size=5)

    @FUZZ
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        rule = data.draw(st.sampled_from(rules), label="rule")
        values = {name: data.draw(path_value(name, conv), label=name) for name, conv in rule._converters.items()}
        path = app.url_map.bind("localhost").build(rule.endpoint, values)
        who = data.draw(st.sampled_from(["alice", "anonymous", "bearer"]), label="who")
        shape = data.draw(st.sampled_from(["form", "json", "webhook", "bytes"]), label="shape")
        headers: dict[str, str] = {"HX-Request": "true"}
        if shape == "form":
            kwargs: dict[str, Any] = {"data": data.draw(form_values(), label="form")}
        else:
            body = (
                json.dumps(data.draw(JSON, label="json")).encode()
                if shape == "json"
                else json.dumps(data.draw(webhook_shapes(), label="webhook")).encode()
                if shape == "webhook"
                else data.draw(st.binary(max_size=200), label="bytes")
            )
            headers["Content-Type"] = "application/json"
            if rule.endpoint.startswith("connectors."):
                headers = signed(path, body, headers, data.draw(st.booleans(), label="sign"))
            kwargs = {"data": body}
        if who == "alice":
            if "alice" not in people:  # a fuzzed /logout signed her out: sign in again
                people["alice"] = sign_in("alice@example.com")
            person: Person = people["alice"]
            client = person.client
            headers["X-CSRFToken"] = person.csrf
            if rule.endpoint == "auth.logout":
                del people["alice"]
        else:
            client = app.test_client()
            if who == "bearer":
                headers["Authorization"] = f"Bearer {bearer}"
        response = client.post(path, headers=headers, **kwargs)
        assert response.status_code < 500, (path, who, shape, response.status_code, response.get_data(as_text=True)[:500])

    fuzz()
