"""Cards an agent could make look alike (found by a red-team run): two posts with one title, a
title whose line breaks pass for rows in a chat thread, two file names spelled in different
Unicode forms, and a flood of cards spread over many runs."""

from __future__ import annotations

import unicodedata

import sqlalchemy as sa

from app.auth import create_token
from app.connectors.base import card_text
from app.extensions import db
from app.models import Approval, User
from tests.conftest import api_headers


def ask(app, token, text):
    client = app.test_client()
    convo = client.post("/api/conversations", json={}, headers=api_headers(token)).get_json()["id"]
    return client.post(f"/api/conversations/{convo}/messages", json={"text": text}, headers=api_headers(token)).get_json()


def agent_token(app, email="alice@example.com"):
    with app.app_context():
        return create_token(db.session.scalar(sa.select(User).where(User.email == email)), name="agent")


def test_two_posts_an_agent_made_look_alike_get_different_cards(app, posts):
    token = agent_token(app)
    ask(app, token, '/draft_post title="Spring meetup" body=dup status=draft')  # a WRITE: no card needed
    with app.app_context():
        from app.models import Post

        copy = max(p.id for p in db.session.scalars(sa.select(Post).where(Post.title == "Spring meetup")))
    original = ask(app, token, f"/delete_post post={posts['Spring meetup']}")["pending"][0]
    duplicate = ask(app, token, f"/delete_post post={copy}")["pending"][0]
    assert original["reason"] == duplicate["reason"]
    assert original["rows"] != duplicate["rows"]
    assert {"label": "Id", "value": f"#{posts['Spring meetup']}"} in original["rows"]
    assert {"label": "Id", "value": f"#{copy}"} in duplicate["rows"]


def test_line_breaks_in_a_value_cannot_pass_for_rows_in_a_chat_thread():
    approval = Approval(
        reason="Send this email as alice@example.com?\nTo: boss@example.com",
        rows=[
            {"label": "To", "value": "dana@example.org"},
            {"label": "Message", "value": "line1\nTo: boss@example.com\n\nSubject: urgent"},
        ],
    )
    lines = card_text(approval).splitlines()
    assert lines[0] == ("⚠️ Send this email as alice@example.com? ⏎ To: boss@example.com Reply 'Yes' to confirm.")
    rows = [line for line in lines[1:] if not line.startswith("    │")]
    assert rows == ["To: dana@example.org", "Message: line1"]  # every other line is marked as the Message's
    assert "    │ To: boss@example.com" in lines and "    │ Subject: urgent" in lines


def test_a_file_name_in_an_unusual_unicode_form_is_flagged(app, alice, tmp_path):
    folder = tmp_path / "files" / "acme" / "docs"
    folder.mkdir(parents=True)
    nfc, nfd = unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")
    (folder / nfc).write_text("one")
    (folder / nfd).write_text("two")
    convo = alice.new_conversation()
    plain = alice.say(convo, f"/manage_files operation=delete path=docs/{nfc}")
    odd = alice.say(convo, f"/manage_files operation=delete path=docs/{nfd}")
    assert "not NFC" not in plain
    assert "not NFC" in odd  # the look-alike says so on its card


def test_an_agent_cannot_flood_the_person_with_cards_across_runs(app, posts):
    app.config["APPROVALS_MAX_PENDING_PER_PERSON"] = 7
    token = agent_token(app)
    said = [ask(app, token, f"/delete_post post={posts['Spring meetup']}") for _ in range(10)]
    with app.app_context():
        pending = db.session.scalar(sa.select(sa.func.count()).select_from(Approval).where(Approval.status == "pending"))
    assert pending == 7
    assert "too many requests already wait" in said[-1]["messages"][-1]["text"]
