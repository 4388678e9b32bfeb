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
from tests.helpers.prompts import a_prompt


def ask(app, token, text):
    client = app.test_client()
    convo = client.post("/api/conversations", json={}, headers=api_headers(token)).get_json()["id"]
    return client.post(f"/api/conversations/{convo}/messages", json={"text": text}, headers=api_headers(token)).get_json()


def agent_token(app, email="alice@example.com", name="agent"):
    with app.app_context():
        return create_token(db.session.scalar(sa.select(User).where(User.email == email)), name=name)


def client_token(app, email="alice@example.com"):
    """The person's own app: her own hand (DESIGN §3.1)."""
    with app.app_context():
        return create_token(db.session.scalar(sa.select(User).where(User.email == email)), scope="client")


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
    prompt = a_prompt(
        "Send this email as alice@example.com?\nTo: boss@example.com",
        [("To", "dana@example.org"), ("Message", "line1\nTo: boss@example.com\n\nSubject: urgent")],
    )
    lines = card_text(prompt).splitlines()
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


def pending(app, by_agent=None):
    query = sa.select(sa.func.count()).select_from(Approval).where(Approval.status == "pending")
    if by_agent is not None:
        query = query.where(Approval.requested_by_agent.is_(by_agent))
    with app.app_context():
        return db.session.scalar(query)


def test_an_agent_cannot_flood_the_person_with_cards_across_runs(app, posts):
    app.config["APPROVALS_MAX_PENDING_FROM_AGENTS"] = 7
    token = agent_token(app)
    said = [ask(app, token, f"/delete_post post={posts['Spring meetup']}") for _ in range(10)]
    assert pending(app) == 7
    assert "too many requests already wait" in said[-1]["messages"][-1]["text"]


def test_an_agent_filling_its_cap_leaves_the_persons_own_requests_working(app, posts):
    app.config.update(APPROVALS_MAX_PENDING_FROM_AGENTS=3, APPROVALS_MAX_PENDING_PER_PERSON=2)
    token = agent_token(app)
    for _ in range(5):
        ask(app, token, f"/delete_post post={posts['Spring meetup']}")
    own = client_token(app)
    said = [ask(app, own, f"/delete_post post={posts['Launch notes']}") for _ in range(2)]
    assert [len(s["pending"]) for s in said] == [1, 1]  # her own cap, whole
    assert (pending(app, by_agent=True), pending(app, by_agent=False)) == (3, 2)


def test_two_agent_tokens_share_one_cap(app, posts):
    app.config["APPROVALS_MAX_PENDING_FROM_AGENTS"] = 3
    laptop, ci = agent_token(app, name="laptop"), agent_token(app, name="ci")
    for token in (laptop, ci, laptop, ci, laptop):
        ask(app, token, f"/delete_post post={posts['Spring meetup']}")
    assert pending(app) == 3


def test_an_mcp_agents_cards_count_against_the_agents_cap_not_the_persons(app, posts):
    from app.copilot import call_direct
    from app.copilot.approvals import Actor

    app.config.update(APPROVALS_MAX_PENDING_FROM_AGENTS=2, APPROVALS_MAX_PENDING_PER_PERSON=1)
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        mcp = Actor(user=alice, binding="pat:1", channel="mcp", agent=True)  # what app.mcp acts as for an agent token
        for _ in range(3):
            call_direct(mcp, "delete_post", {"post": posts["Spring meetup"]})
    said = ask(app, client_token(app), f"/delete_post post={posts['Launch notes']}")
    assert len(said["pending"]) == 1
    assert (pending(app, by_agent=True), pending(app, by_agent=False)) == (2, 1)
