"""Bad input (issue 13, point 13) — deep or non-standard JSON, lone surrogates, over-long messages,
odd encodings — is a clear 4xx naming the problem or is stored safely, never a 500 and never words
lost. (Where sign-in sends you and what it costs, points 9 and 12: test_signin.py.)"""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Approval, Message, Post, User
from tests.conftest import api_headers
from tests.fake_chat import email_headers, slack_headers
from tests.helpers.messages import LIMIT

# --- 13. JSON the API and the webhooks refuse, clearly -----------------------------------------------


@pytest.fixture
def api(app, people):
    """(client, headers, conversation id) for alice's token."""
    from app.auth import create_token

    with app.app_context():
        token = create_token(db.session.get(User, people["alice"]))
    client = app.test_client()
    convo = client.post("/api/conversations", headers=api_headers(token)).get_json()["id"]
    return client, {**api_headers(token), "Content-Type": "application/json"}, convo


def stored_user_messages(app, convo):
    with app.app_context():
        return list(db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo, Message.role == "user")))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[" * 100_000, "nested more than 64 levels deep"),
        (b'{"text": ' + b"[" * 100_000, "nested more than 64 levels deep"),
        (b'{"text": "hi", "x": ' + b"[" * 65 + b"]" * 65 + b"}", "nested more than 64 levels deep"),
        (b"1e999999", "the number 1e999999 is out of range"),
        (b'{"text": -1e999999}', "the number -1e999999 is out of range"),
        (b'{"text": NaN}', "NaN is not a JSON number"),
        (b'{"text": Infinity}', "Infinity is not a JSON number"),
        (b'{"text": ' + b"9" * 5000 + b"}", "the number 99999999999999999999… is out of range"),
        (b'{"text": "caf\xe9"}', "'utf-8' codec can't decode byte 0xe9"),
    ],
)
def test_json_that_is_not_json_we_take_is_a_clear_400(app, api, body, why):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, data=body)
    assert response.status_code == 400 and response.get_json()["error"] == "BadJson"
    assert response.get_json()["message"].startswith("The body is not valid JSON: ")
    assert why in response.get_json()["message"]
    assert stored_user_messages(app, convo) == []


def test_card_answers_refuse_deep_json_and_name_the_content_type(app, api):
    client, headers, _ = api
    deep = client.post(f"/api/approvals/{'0' * 32}/submit", headers=headers, data=b'{"values": ' + b"[" * 100_000)
    assert deep.status_code == 400 and "nested more than 64 levels deep" in deep.get_json()["message"]
    plain = client.post(
        f"/api/approvals/{'0' * 32}/confirm", headers={**headers, "Content-Type": "text/plain"}, data=b'{"token": "x"}'
    )
    assert plain.status_code == 400
    assert plain.get_json()["message"] == "Send a JSON object with Content-Type: application/json."


@pytest.fixture
def webhook_secrets(app):
    app.config.update(TELEGRAM_WEBHOOK_SECRET="s", SLACK_SIGNING_SECRET="s", EMAIL_WEBHOOK_SECRET="s")


@pytest.mark.parametrize("body", [b'{"message": ' + b"[" * 100_000, b'{"update_id": NaN}', b'{"update_id": 1e999999}'])
def test_signed_webhooks_with_json_we_do_not_take_are_a_400(app, webhook_secrets, body):
    client = app.test_client()
    telegram = client.post(
        "/connectors/telegram", data=body, headers={"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": "s"}
    )
    slack = client.post("/connectors/slack/events", data=body, headers=slack_headers(body, secret="s"))
    mail = client.post("/connectors/email/inbound", data=body, headers=email_headers(body, secret="s"))
    assert (telegram.status_code, slack.status_code, mail.status_code) == (400, 400, 400)


# --- 13. a lone surrogate: refused at the door, or (from a chat service) kept, safely ----------------


def test_a_lone_surrogate_in_a_message_is_refused_naming_it_and_nothing_is_half_saved(app, api):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, data=b'{"text": "caf\\ud800 au lait"}')
    assert response.status_code == 400 and response.get_json()["error"] == "UnstorableText"
    assert "lone surrogate" in response.get_json()["message"]
    assert stored_user_messages(app, convo) == []


def test_a_lone_surrogate_anywhere_in_a_json_body_is_refused_before_anything_reads_it(app, alice):
    convo = alice.new_conversation()
    card = alice.say(convo, "/draft_post title=Surrogates")
    approval = re.findall(r'id="approval-([0-9a-f]{32})"', card)[-1]
    values = b'{"token": "x", "values": {"title": "a", "body": "\\udc00", "status": "draft"}, "\\ud800": 1}'
    response = alice.client.post(
        f"/api/approvals/{approval}/submit", data=values, headers={"Content-Type": "application/json", "X-CSRFToken": alice.csrf}
    )
    assert response.status_code == 400 and "lone surrogate" in response.get_json()["message"]
    with app.app_context():
        assert db.session.get(Approval, approval).status == "pending"
        assert db.session.scalar(sa.select(Post).where(Post.title == "a")) is None


def test_a_surrogate_pair_sent_as_escapes_is_the_character_it_encodes(app, api):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, data=b'{"text": "party \\ud83c\\udf89"}')
    assert response.status_code == 200
    assert stored_user_messages(app, convo) == ["party \N{PARTY POPPER}"]


# --- 13. the length limit: refused whole, saying the limit, on every channel -------------------------


def test_an_over_long_browser_message_is_refused_saying_the_limit(app, alice):
    convo = alice.new_conversation()
    refused = alice.htmx_post(f"/c/{convo}/messages", text="y" * 4001)
    assert refused.status_code == 413
    assert LIMIT in refused.get_data(as_text=True) and "<html" not in refused.get_data(as_text=True)
    page = alice.client.post(f"/c/{convo}/messages", data={"text": "y" * 4001}, headers={"X-CSRFToken": alice.csrf})
    assert page.status_code == 413 and LIMIT in page.get_data(as_text=True)
    assert stored_user_messages(app, convo) == []
    assert alice.htmx_post(f"/c/{convo}/messages", text="y" * 4000).status_code == 200
    assert stored_user_messages(app, convo) == ["y" * 4000]  # at the limit: whole, not cut


def test_an_over_long_api_message_is_refused_saying_the_limit(app, api):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, json={"text": "y" * 4001})
    assert response.status_code == 413
    assert response.get_json() == {"error": "MessageTooLong", "message": LIMIT}
    assert stored_user_messages(app, convo) == []


@pytest.mark.parametrize("app_config", [{"MESSAGE_MAX_CHARS": 10}])
def test_the_length_limit_is_a_setting(app, api):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, json={"text": "eleven char"})
    assert response.status_code == 413
    assert response.get_json()["message"].startswith("Messages are limited to 10 characters; this one has 11.")
    assert client.post(f"/api/conversations/{convo}/messages", headers=headers, json={"text": "ten chars!"}).status_code == 200


# --- 13. headers and forms that once reached a 500 ---------------------------------------------------


def test_an_origin_no_browser_would_send_is_refused_as_cross_site(app, alice):
    convo = alice.new_conversation()
    for origin in ("http://[", "http://[::1", "http://a]b"):
        response = alice.client.post(
            f"/c/{convo}/messages", data={"text": "hi"}, headers={"X-CSRFToken": alice.csrf, "Origin": origin}
        )
        assert response.status_code == 403 and "came from another site" in response.get_data(as_text=True)
    assert stored_user_messages(app, convo) == []


def test_invalid_utf8_in_a_form_is_kept_with_its_bytes_still_escaped(app, alice):
    convo = alice.new_conversation()
    response = alice.client.post(
        f"/c/{convo}/messages",
        data=b"text=caf%E9+%ED%A0%80",
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-CSRFToken": alice.csrf, "HX-Request": "true"},
    )
    assert response.status_code == 200
    assert stored_user_messages(app, convo) == ["caf%E9 %ED%A0%80"]  # werkzeug keeps what it cannot decode


def test_a_multipart_message_is_read_like_a_form(app, alice):
    convo = alice.new_conversation()
    body = b'--b\r\nContent-Disposition: form-data; name="text"\r\n\r\n' + b"y" * 4001 + b"\r\n--b--\r\n"
    response = alice.client.post(
        f"/c/{convo}/messages",
        data=body,
        headers={"Content-Type": "multipart/form-data; boundary=b", "X-CSRFToken": alice.csrf, "HX-Request": "true"},
    )
    assert response.status_code == 413 and LIMIT in response.get_data(as_text=True)
    assert stored_user_messages(app, convo) == []


def test_the_nul_refusal_still_reads_the_same(app, api):
    client, headers, convo = api
    response = client.post(f"/api/conversations/{convo}/messages", headers=headers, data=json.dumps({"text": "a\x00b"}).encode())
    assert response.status_code == 400
    assert response.get_json()["message"] == "Text may not contain the NUL character (U+0000)."


def test_the_api_answers_401_and_403_in_its_own_json_shape(app, alice):
    anonymous = app.test_client().get("/api/admin/approvals")
    assert anonymous.status_code == 401 and anonymous.get_json()["error"] == "Unauthorized"
    not_admin = alice.client.get("/api/admin/approvals")
    assert not_admin.status_code == 403 and not_admin.get_json()["error"] == "Forbidden"
    assert app.test_client().get("/api/no-such-route").get_json()["error"] == "NotFound"
