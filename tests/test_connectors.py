"""Slack, Telegram and email: real-shaped webhooks in, real HTTP/SMTP out, reply-to-confirm."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import sqlalchemy as sa

from app.extensions import db, redis_client
from app.models import Approval, ConnectorIdentity, Conversation, User
from tests.conftest import DATABASE_URL, make_approvals
from tests.fake_chat import Chat, chat_fixtures, queued_jobs, slack_headers
from tests.helpers.prompts import newest_prompt, shown_in_chat
from tests.services import REDIS_TIMEOUTS, WAIT, PrivateRedis, eventually

PROMPT = "⚠️ Delete this post? This cannot be undone. Reply 'Yes' to confirm."


services, app_config, chat = chat_fixtures()


def ask_delete(chat, posts, title="Spring meetup", thread="main"):
    chat.say(f"/delete_post post={posts[title]}", thread=thread)
    assert PROMPT in chat.sent(thread)[-1]
    shown_in_chat(newest_prompt(chat.app, channel=chat.name), chat.sent(thread)[-1], chat.name)  # the engine's Prompt


def test_yes_confirms_once_and_the_outcome_is_posted(chat, posts, handle_calls):
    ask_delete(chat, posts)
    assert handle_calls["n"] == 0
    chat.say("Yes")
    assert handle_calls["n"] == 1
    assert "Deleted “Spring meetup”." in chat.sent()[-2:][0]
    chat.say("Yes")  # the wait is over: an ordinary message now
    assert handle_calls["n"] == 1


def test_the_outcome_line_says_who_decided_it_and_when(chat, posts):
    ask_delete(chat, posts)
    chat.say("no")
    said = r"Declined — nothing was done\. \(Declined by you, \d{4}-\d\d-\d\d \d\d:\d\d UTC\)"
    assert any(re.fullmatch(said, line) for line in chat.sent()), chat.sent()


@pytest.mark.parametrize("reply", ["yes please", "no"])
def test_anything_but_yes_declines(chat, posts, handle_calls, reply):
    ask_delete(chat, posts)
    chat.say(reply)
    assert any(line.startswith("Declined — nothing was done. (Declined by you, ") for line in chat.sent())
    assert handle_calls["n"] == 0


def test_a_file_without_text_keeps_the_wait_open(chat, posts, handle_calls):
    ask_delete(chat, posts)
    chat.say("", files=True)
    assert handle_calls["n"] == 0
    chat.say("yes")
    assert handle_calls["n"] == 1


def test_yes_from_another_person_in_the_thread_does_nothing(chat, posts, handle_calls):
    ask_delete(chat, posts)
    chat.say("yes", who="bob")
    assert handle_calls["n"] == 0
    chat.say("YES")  # alice's wait is still open
    assert handle_calls["n"] == 1


def test_yes_in_another_thread_does_nothing(chat, posts, handle_calls):
    ask_delete(chat, posts)
    chat.say("yes", thread="other")
    assert handle_calls["n"] == 0


def test_yes_on_another_connector_does_nothing(app, chat, services, posts, handle_calls):
    ask_delete(chat, posts)
    other = Chat(app, "slack" if chat.name != "slack" else "telegram", services)
    other.say("yes")
    assert handle_calls["n"] == 0


def test_yes_after_the_wait_expired_is_an_ordinary_message(app, chat, posts, handle_calls):
    app.config["CONNECTOR_CONFIRM_TTL"] = 1
    ask_delete(chat, posts)
    with app.app_context():  # the wait is gone once Redis has expired it, whenever that is
        eventually(lambda: not redis_client.client.keys("awaiting_confirm:*"), "the wait expired")
    chat.say("yes")
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.scalar(sa.select(Approval.status)) == "pending"  # the web card still works


def test_a_new_card_takes_the_yes_of_the_thread(app, chat, posts, handle_calls, model):
    """Email's cards have no buttons: the newer card supersedes the waiting one. Slack's and
    Telegram's have: the older one still waits for its own button (tests/test_card_buttons.py)."""
    from app.copilot.kit import tool_call

    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]), tool_call("delete_post", post=posts["Launch notes"]))
    chat.say("delete both")
    assert [t.startswith("⚠️ Delete this post?") for t in chat.sent()[-2:]] == [True, True]
    chat.say("yes")
    with app.app_context():
        rows = db.session.scalars(sa.select(Approval).order_by(Approval.created_at)).all()
        older = "superseded" if chat.name == "email" else "pending"
        assert [(a.rows[0]["value"], a.status) for a in rows] == [("Spring meetup", older), ("Launch notes", "done")]
    assert handle_calls["n"] == 1
    if chat.name == "email":
        assert "A newer request replaced this one before the person answered." in model.seen()


def test_telegram_a_yes_sent_as_a_reply_to_the_card_in_a_group_answers_it(app, services, posts, handle_calls):
    """In a Telegram group without topics, a message sent with Reply carries the thread of replies
    it belongs to (`message_thread_id`: its root, the card's message) but no `is_topic_message`:
    it is the group's own thread, so it answers the card, and nothing goes back to a thread that
    a group without topics does not have."""
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts)
    card = [p for p in chat.api.posts if "reply_markup" in p][-1]
    chat.say("yes", message_thread_id=card["sent_as"], reply_to_message={"message_id": card["sent_as"]})
    assert handle_calls["n"] == 1
    assert "Deleted “Spring meetup”." in "".join(chat.sent())
    assert all("message_thread_id" not in p for p in chat.api.posts)


def test_telegram_a_forum_topic_is_a_thread_of_its_own(app, services, posts, handle_calls):
    """In a forum's topic (`is_topic_message`), the card goes to the topic and waits for a reply
    there: a "yes" in the group's General topic or in another topic answers nothing."""
    chat = Chat(app, "telegram", services)
    topic = {"message_thread_id": 7, "is_topic_message": True}
    chat.say(f"/delete_post post={posts['Spring meetup']}", **topic)
    card = [p for p in chat.api.posts if "reply_markup" in p][-1]
    assert card["message_thread_id"] == 7 and PROMPT in card["text"]
    chat.say("yes")  # General
    chat.say("yes", message_thread_id=8, is_topic_message=True)
    assert handle_calls["n"] == 0
    chat.say("yes", **topic, reply_to_message={"message_id": 7, "forum_topic_created": {"name": "Blog"}})  # (the topic's root)
    assert handle_calls["n"] == 1


def test_unknown_senders_are_refused_politely_and_reach_no_agent(app, chat):
    with app.app_context():
        db.session.execute(sa.delete(ConnectorIdentity))
        db.session.commit()
    chat.say("/list_posts")
    assert chat.sent()[-1].startswith("Sorry, I don't know who you are here.")
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 0


def test_a_redelivered_webhook_acts_once(chat, posts, handle_calls):
    ask_delete(chat, posts)
    redeliver = {"telegram": 777_001, "slack": "EvSAME", "email": "<same@example.com>"}[chat.name]
    chat.say("yes", redeliver=redeliver)
    chat.say("yes", redeliver=redeliver)
    assert handle_calls["n"] == 1


def test_a_connector_that_may_not_confirm_posts_a_link(app, chat, posts, handle_calls):
    app.config["CONNECTORS_CONFIRM_BY_REPLY"] = []
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    assert chat.sent()[-1].startswith("Please answer this in Countersign: https://countersign.example/approvals/")
    chat.say("yes")
    assert handle_calls["n"] == 0


def test_email_yes_above_quoted_history_confirms(app, services, posts, handle_calls):
    chat = Chat(app, "email", services)
    ask_delete(chat, posts)
    chat.say("Yes\n\nOn Mon, Countersign wrote:\n> no\n> Delete this post?")
    assert handle_calls["n"] == 1
    reply = services[1].inbox.messages[-1]
    assert reply["To"] == "alice@example.com" and reply["Subject"] == "Re: Blog cleanup"


def test_bad_slack_signature_and_stale_timestamp_are_401(app):
    body = json.dumps({"type": "event_callback", "event": {"type": "message", "text": "yes"}})
    client = app.test_client()
    assert client.post("/connectors/slack/events", data=body, headers=slack_headers(body, secret="wrong")).status_code == 401
    assert (
        client.post("/connectors/slack/events", data=body, headers=slack_headers(body, stamp=int(time.time()) - 301)).status_code
        == 401
    )
    assert client.post("/connectors/slack/events", data=body, headers={}).status_code == 401


def test_slack_url_verification_answers_the_challenge(app):
    body = json.dumps({"type": "url_verification", "challenge": "abc123"})
    response = app.test_client().post("/connectors/slack/events", data=body, headers=slack_headers(body))
    assert response.get_json() == {"challenge": "abc123"}


def test_wrong_telegram_secret_is_403_and_bad_email_signature_401(app):
    client = app.test_client()
    assert (
        client.post(
            "/connectors/telegram", json={"update_id": 1}, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}
        ).status_code
        == 403
    )
    assert (
        client.post(
            "/connectors/email/inbound", json={"from": "a@b.c"}, headers={"X-Countersign-Signature": "sha256=00"}
        ).status_code
        == 401
    )


@pytest.mark.parametrize(
    "name, path, status",
    [
        ("telegram", "/connectors/telegram", 403),
        ("slack", "/connectors/slack/events", 401),
        ("email", "/connectors/email/inbound", 401),
    ],
)
def test_an_unproven_webhook_is_refused_before_its_body_is_read(app, caplog, name, path, status):
    response = app.test_client().post(path, data=b"[not json", headers={"Content-Type": "application/json"})
    assert response.status_code == status  # not the 400 its body would earn once read
    assert f"{name} webhook refused" in caplog.text


def test_every_connector_is_served_by_the_one_webhook_view(app):
    from app.connectors import CONNECTORS, webhook
    from app.connectors.base import Connector

    rules = {r.endpoint: r for r in app.url_map.iter_rules() if r.endpoint.startswith("connectors.")}
    # (and Slack's interactivity URL, where its buttons' presses come: signed the same way)
    assert sorted(rules) == sorted([*(f"connectors.{name}" for name in CONNECTORS), "connectors.slack_interactions"])
    for name, connector in CONNECTORS.items():
        assert isinstance(connector, Connector) and rules[f"connectors.{name}"].rule == f"/connectors{connector.path}"
        assert app.view_functions[f"connectors.{name}"] is webhook


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    yield server
    server.stop()


def test_redis_down_mid_wait_runs_nothing_and_says_so_then_recovers(app, services, posts, handle_calls, private_redis):
    import redis

    app.extensions["redis"] = redis.Redis.from_url(private_redis.url, **REDIS_TIMEOUTS)
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts, "Spring meetup")
    private_redis.stop()
    chat.say("yes")
    assert chat.sent()[-1].startswith(
        "I couldn't check your confirmation — try again in a moment, or use the link: https://countersign.example/approvals/"
    )
    assert handle_calls["n"] == 0
    private_redis.start()  # back, and empty
    ask_delete(chat, posts, "Launch notes")
    chat.say("yes")
    assert handle_calls["n"] == 1
    with app.app_context():
        statuses = {a.rows[0]["value"]: a.status for a in db.session.scalars(sa.select(Approval))}
    assert statuses == {"Spring meetup": "pending", "Launch notes": "done"}  # the first card still waits on the web


def test_a_thousand_waiting_confirmations_hold_no_thread(app, services, handle_calls):
    import threading

    from app.connectors import CONNECTORS
    from app.connectors.base import post_card, wait_key
    from app.models import ConnectorThread

    ids = make_approvals(app, 1000, prefix="t")
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        convo = db.session.scalar(sa.select(Conversation))

        # The fake chat API answers each post on a short-lived thread of its own: not ours to count.
        def ours():
            return {t for t in threading.enumerate() if "process_request_thread" not in t.name}

        before = ours()
        for i in range(1000):
            thread = ConnectorThread(connector="telegram", thread_key=str(-5000 - i), user_id=alice.id, conversation_id=convo.id)
            post_card(CONNECTORS["telegram"], thread, db.session.get(Approval, ids[i]))
        waiting = sum(1 for i in range(1000) if redis_client.client.exists(wait_key("telegram", str(-5000 - i), alice.id)))
        after = ours()
        queued = queued_jobs(app)
    assert waiting == 1000
    assert after <= before  # nothing waits in a thread: the state is in Redis and the database
    assert queued == 0 and handle_calls["n"] == 0


def test_slack_acks_at_once_and_a_worker_runs_the_turn(app, services, posts):
    chat = Chat(app, "slack", services)
    body, headers = chat._slack(f"/delete_post post={posts['Spring meetup']}", "alice", "main", False, None)
    response = app.test_client().post("/connectors/slack/events", data=body, headers=headers)
    assert response.status_code == 200 and chat.sent() == []  # acknowledged; nothing done yet
    with app.app_context():
        assert queued_jobs(app) == 1
    chat.work()
    assert PROMPT in chat.sent()[-1]


def test_without_redis_the_turn_runs_in_a_background_thread(app, services, posts):
    import fakeredis

    from app import copilot

    app.config["REDIS_URL"] = None
    app.config["TURNS_RUNNER"] = ""
    app.extensions["redis"] = fakeredis.FakeRedis()
    copilot.init_app(app)  # what an app made without REDIS_URL has: the in-process pool
    chat = Chat(app, "telegram", services)
    body, headers = chat._telegram(f"/delete_post post={posts['Spring meetup']}", "alice", "main", False, None)
    assert app.test_client().post("/connectors/telegram", data=body, headers=headers).status_code == 200
    eventually(chat.sent, "the background thread's turn posted its card")  # a busy machine may take a while
    assert PROMPT in chat.sent()[-1]
    # The thread goes on after posting (commit, app context teardown): let it end before the app's
    # pool is disposed, or its connection is orphaned and closed by the garbage collector in some
    # later test (a ResourceWarning, an error under filterwarnings=error).
    for thread in threading.enumerate():
        if thread.name == "connector-telegram":
            thread.join(timeout=WAIT)


def test_connectors_link_maps_an_identity_to_a_person(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["connectors", "link", "slack", "U123", "alice@example.com"])
    assert result.exit_code == 0 and "slack U123 -> alice@example.com" in result.output
    with app.app_context():
        row = db.session.scalar(sa.select(ConnectorIdentity).where(ConnectorIdentity.external_id == "U123"))
        assert row.user.email == "alice@example.com"
    assert runner.invoke(args=["connectors", "link", "slack", "U9", "nobody@example.com"]).exit_code != 0


def test_a_thread_whose_conversation_was_deleted_answers_nothing_and_starts_a_new_one(app, chat, posts, handle_calls):
    """The person deleted the thread's conversation on the web: its card ended `cancelled`, so a
    "yes" runs nothing (the thread is told so); the next message starts a new conversation."""
    from app.copilot import conversations
    from app.copilot.approvals import Actor
    from app.models import Message

    ask_delete(chat, posts)
    with app.app_context():
        old = db.session.scalar(sa.select(Conversation))
        conversations.delete(old, Actor(user=old.user, binding="web:test"))
        old_id = old.id
    chat.say("Yes")
    assert handle_calls["n"] == 0
    assert any(line.startswith("Set aside — nothing was done. (Set aside by you, ") for line in chat.sent())
    chat.say("/list_posts")
    with app.app_context():
        new = db.session.scalar(sa.select(Conversation).where(Conversation.id != old_id))
        assert new is not None and new.deleted_at is None
        said = db.session.scalars(sa.select(Message.text).where(Message.conversation_id == new.id, Message.role == "user"))
        assert list(said) == ["/list_posts"]
        assert db.session.get(Conversation, old_id).deleted_at is not None


@pytest.mark.skipif(DATABASE_URL.startswith("postgres"), reason="SQLite's write lock")
def test_a_chat_message_that_meets_the_database_away_is_told_to_send_it_again_and_nothing_is_kept(app, services, database_url):
    # Its webhook was answered 200 before the job ran (the service never sends it again); the job
    # met the database away (here: SQLite locked by another writer past the wait) and failed with
    # nothing said, and the message was lost (a helper's attack, PostgreSQL stopped). The person is
    # told to send it again, nothing is kept, and sent again once the database is back, it runs.
    import sqlite3

    from app.models import Message

    chat = Chat(app, "telegram", services)
    with app.app_context():
        engine = db.engine

    def short_wait(dbapi_connection, _record):  # (the app's connections give up on the lock at once)
        dbapi_connection.execute("PRAGMA busy_timeout = 100")

    sa.event.listen(engine, "connect", short_wait)
    engine.dispose()
    writer = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        chat.say("/list_posts")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        sa.event.remove(engine, "connect", short_wait)
        engine.dispose()
    told = "Countersign is briefly unavailable, so nothing was done with your message. Please send it again in a moment."
    assert chat.sent()[-1] == told
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.text == "/list_posts")) == 0
    chat.say("/list_posts")
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.text == "/list_posts")) == 1


def test_with_redis_down_a_message_that_answers_no_card_here_is_told_to_send_it_again(app, services, handle_calls, private_redis):
    # A helper's attack (2026-12-07): with Redis stopped, a new chat message (no answer to
    # anything) got "I couldn't check your confirmation — ... use the link: <the person's newest
    # pending card>", a card from another conversation (an agent's). Only a card waiting in this
    # thread is linked; anything else is to be sent again, and nothing was done.
    import redis

    from app.models import Message

    make_approvals(app, 1, prefix="e")  # (alice's, pending, in a conversation of its own)
    app.extensions["redis"] = redis.Redis.from_url(private_redis.url, **REDIS_TIMEOUTS)
    chat = Chat(app, "telegram", services)
    private_redis.stop()
    chat.say("/list_posts")
    told = "Countersign is briefly unavailable, so nothing was done with your message. Please send it again in a moment."
    assert chat.sent()[-1] == told
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Message.id)).where(Message.text == "/list_posts")) == 0
    assert handle_calls["n"] == 0
