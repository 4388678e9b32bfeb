"""Slack, Telegram and email: real-shaped webhooks in, real HTTP/SMTP out, reply-to-confirm."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time

import pytest
import sqlalchemy as sa
from rq import Queue, SimpleWorker

from app.extensions import db, redis_client
from app.models import Approval, ConnectorIdentity, Conversation, User
from tests.conftest import make_approvals
from tests.fake_chat import FakeChatApi, FakeSmtp
from tests.services import PrivateRedis

SLACK_SECRET = "slack-signing-secret"
TELEGRAM_SECRET = "telegram-secret-token"
EMAIL_SECRET = "email-webhook-secret"
PROMPT = "⚠️ Delete this post? This cannot be undone. Reply 'Yes' to confirm."
counter = itertools.count(1000)


@pytest.fixture(scope="module")
def services():
    api, smtp = FakeChatApi(), FakeSmtp()
    yield api, smtp
    api.close()
    smtp.close()


@pytest.fixture
def app_config(services):
    api, smtp = services
    return {"TELEGRAM_BOT_TOKEN": "123:abc", "TELEGRAM_WEBHOOK_SECRET": TELEGRAM_SECRET,
            "TELEGRAM_API_BASE": api.base_url, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SLACK_SECRET,
            "SLACK_API_BASE": api.base_url, "EMAIL_WEBHOOK_SECRET": EMAIL_SECRET, "SMTP_URL": smtp.url,
            "MAIL_FROM": "copilot@countersign.example", "PUBLIC_URL": "https://countersign.example"}


IDS = {"telegram": {"alice": "111", "bob": "222"}, "slack": {"alice": "U111", "bob": "U222"},
       "email": {"alice": "alice@example.com", "bob": "bob@example.com"}}


class Chat:
    """One connector seen from the outside: post webhooks as the service would, read what came back."""

    def __init__(self, app, name, services):
        self.app, self.name = app, name
        self.api, self.smtp = services
        self.api.posts.clear()
        self.smtp.inbox.messages.clear()
        self.roots: dict[str, str] = {}
        with app.app_context():
            for person, external in IDS[name].items():
                user = db.session.scalar(sa.select(User).where(User.email == f"{person}@example.com"))
                db.session.add(ConnectorIdentity(connector=name, external_id=external, user_id=user.id))
            db.session.commit()

    def say(self, text, who="alice", thread="main", files=False, redeliver=None):
        body, headers = getattr(self, f"_{self.name}")(text, who, thread, files, redeliver)
        response = self.app.test_client().post(self.url, data=body, headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        self.work()
        return response

    def work(self):
        """What an RQ worker does, in-process: run the queued turns."""
        import redis

        with self.app.app_context():
            queue = Queue("countersign", connection=redis_client.client)
            try:
                SimpleWorker([queue], connection=redis_client.client).work(burst=True)
            except redis.exceptions.ConnectionError:
                pass  # Redis is down: the webhook answered inline, nothing was queued

    @property
    def url(self):
        return {"telegram": "/connectors/telegram", "slack": "/connectors/slack/events",
                "email": "/connectors/email/inbound"}[self.name]

    def _telegram(self, text, who, thread, files, redeliver):
        update_id = redeliver or next(counter)
        message = {"message_id": update_id, "from": {"id": int(IDS["telegram"][who]), "is_bot": False, "first_name": who},
                   "chat": {"id": {"main": -1001, "other": -1002}[thread], "type": "group"}, "date": int(time.time())}
        if files:
            message["document"] = {"file_id": "F1", "file_name": "report.pdf"}
        if text:
            message["caption" if files else "text"] = text
        body = json.dumps({"update_id": update_id, "message": message})
        return body, {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET}

    def _slack(self, text, who, thread, files, redeliver, stamp=None, secret=SLACK_SECRET):
        event_id = redeliver or f"Ev{next(counter)}"
        event = {"type": "message", "channel": {"main": "C1", "other": "C2"}[thread], "user": IDS["slack"][who],
                 "text": text, "ts": f"{time.time():.6f}", "thread_ts": "1700000000.000100"}
        if files:
            event.update(subtype="file_share", files=[{"id": "F1", "name": "report.pdf"}])
        body = json.dumps({"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event": event,
                           "event_id": event_id, "event_time": int(time.time())})
        return body, slack_headers(body, stamp=stamp, secret=secret)

    def _email(self, text, who, thread, files, redeliver):
        message_id = redeliver or f"<m{next(counter)}@example.com>"
        root = self.roots.setdefault(thread, message_id)
        mail = {"from": f"{who.title()} <{IDS['email'][who]}>", "to": "copilot@countersign.example",
                "subject": "Re: Blog cleanup", "text": text, "message_id": message_id,
                "in_reply_to": root if root != message_id else "", "references": root if root != message_id else "",
                "attachments": [{"filename": "report.pdf"}] if files else []}
        body = json.dumps(mail)
        signature = "sha256=" + hmac.new(EMAIL_SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
        return body, {"Content-Type": "application/json", "X-Countersign-Signature": signature}

    def sent(self, thread="main"):
        """Texts posted back into that thread."""
        if self.name == "email":
            root = self.roots.get(thread)
            return [m.get_payload().strip() for m in self.smtp.inbox.messages if m["In-Reply-To"] == root]
        want = {"telegram": {"main": -1001, "other": -1002}, "slack": {"main": "C1", "other": "C2"}}[self.name][thread]
        key = "chat_id" if self.name == "telegram" else "channel"
        return [p["text"] for p in self.api.posts if p.get(key) == want]


def slack_headers(body, stamp=None, secret=SLACK_SECRET):
    stamp = str(stamp if stamp is not None else int(time.time()))
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}


@pytest.fixture(params=["telegram", "slack", "email"])
def chat(request, app, services):
    return Chat(app, request.param, services)


def ask_delete(chat, posts, title="Spring meetup", thread="main"):
    chat.say(f"/delete_post post={posts[title]}", thread=thread)
    assert PROMPT in chat.sent(thread)[-1]


def test_yes_confirms_once_and_the_outcome_is_posted(chat, posts, handle_calls):
    ask_delete(chat, posts)
    assert handle_calls["n"] == 0
    chat.say("Yes")
    assert handle_calls["n"] == 1
    assert "Deleted “Spring meetup”." in chat.sent()[-2:][0]
    chat.say("Yes")  # the wait is over: an ordinary message now
    assert handle_calls["n"] == 1


@pytest.mark.parametrize("reply", ["yes please", "no"])
def test_anything_but_yes_declines(chat, posts, handle_calls, reply):
    ask_delete(chat, posts)
    chat.say(reply)
    assert "Declined — nothing was done." in chat.sent()
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
    time.sleep(1.5)
    chat.say("yes")
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.scalar(sa.select(Approval.status)) == "pending"  # the web card still works


def test_a_new_card_supersedes_the_waiting_one(app, chat, posts, handle_calls, model):
    from app.copilot.testing import tool_call

    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]), tool_call("delete_post", post=posts["Launch notes"]))
    chat.say("delete both")
    assert [t.startswith("⚠️ Delete this post?") for t in chat.sent()[-2:]] == [True, True]
    chat.say("yes")
    with app.app_context():
        rows = db.session.scalars(sa.select(Approval).order_by(Approval.created_at)).all()
        assert [(a.rows[0]["value"], a.status) for a in rows] == [("Spring meetup", "superseded"), ("Launch notes", "done")]
    assert handle_calls["n"] == 1
    assert "A newer request replaced this one before the person answered." in model.seen()


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
    assert client.post("/connectors/slack/events", data=body,
                       headers=slack_headers(body, secret="wrong")).status_code == 401
    assert client.post("/connectors/slack/events", data=body,
                       headers=slack_headers(body, stamp=int(time.time()) - 301)).status_code == 401
    assert client.post("/connectors/slack/events", data=body, headers={}).status_code == 401


def test_slack_url_verification_answers_the_challenge(app):
    body = json.dumps({"type": "url_verification", "challenge": "abc123"})
    response = app.test_client().post("/connectors/slack/events", data=body, headers=slack_headers(body))
    assert response.get_json() == {"challenge": "abc123"}


def test_wrong_telegram_secret_is_403_and_bad_email_signature_401(app):
    client = app.test_client()
    assert client.post("/connectors/telegram", json={"update_id": 1},
                       headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}).status_code == 403
    assert client.post("/connectors/email/inbound", json={"from": "a@b.c"},
                       headers={"X-Countersign-Signature": "sha256=00"}).status_code == 401


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    yield server
    server.stop()


def test_redis_down_mid_wait_runs_nothing_and_says_so_then_recovers(app, services, posts, handle_calls, private_redis):
    import redis

    app.extensions["redis"] = redis.Redis.from_url(private_redis.url, socket_timeout=2, socket_connect_timeout=2)
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts, "Spring meetup")
    private_redis.stop()
    chat.say("yes")
    assert chat.sent()[-1].startswith("I couldn't check your confirmation — try again in a moment, or use the link: "
                                      "https://countersign.example/approvals/")
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
        before = threading.active_count()
        for i in range(1000):
            thread = ConnectorThread(connector="telegram", thread_key=str(-5000 - i), user_id=alice.id,
                                     conversation_id=convo.id)
            post_card(CONNECTORS["telegram"], thread, db.session.get(Approval, ids[i]))
        waiting = sum(1 for i in range(1000) if redis_client.client.exists(wait_key("telegram", str(-5000 - i))))
        after = threading.active_count()
        queued = len(Queue("countersign", connection=redis_client.client))
    assert waiting == 1000
    assert after == before  # nothing waits in a thread: the state is in Redis and the database
    assert queued == 0 and handle_calls["n"] == 0


def test_slack_acks_at_once_and_a_worker_runs_the_turn(app, services, posts):
    chat = Chat(app, "slack", services)
    body, headers = chat._slack(f"/delete_post post={posts['Spring meetup']}", "alice", "main", False, None)
    response = app.test_client().post("/connectors/slack/events", data=body, headers=headers)
    assert response.status_code == 200 and chat.sent() == []  # acknowledged; nothing done yet
    with app.app_context():
        assert len(Queue("countersign", connection=redis_client.client)) == 1
    chat.work()
    assert PROMPT in chat.sent()[-1]


def test_without_redis_the_turn_runs_in_a_background_thread(app, services, posts):
    import fakeredis

    app.config["REDIS_URL"] = None
    app.extensions["redis"] = fakeredis.FakeRedis()
    chat = Chat(app, "telegram", services)
    body, headers = chat._telegram(f"/delete_post post={posts['Spring meetup']}", "alice", "main", False, None)
    assert app.test_client().post("/connectors/telegram", data=body, headers=headers).status_code == 200
    for _ in range(100):
        if chat.sent():
            break
        time.sleep(0.05)
    assert PROMPT in chat.sent()[-1]
    # The thread goes on after posting (commit, app context teardown): let it end before the app's
    # pool is disposed, or its connection is orphaned and closed by the garbage collector in some
    # later test (a ResourceWarning, an error under filterwarnings=error).
    for thread in threading.enumerate():
        if thread.name == "connector-telegram":
            thread.join(timeout=10)


def test_connectors_link_maps_an_identity_to_a_person(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["connectors", "link", "slack", "U123", "alice@example.com"])
    assert result.exit_code == 0 and "slack U123 -> alice@example.com" in result.output
    with app.app_context():
        row = db.session.scalar(sa.select(ConnectorIdentity).where(ConnectorIdentity.external_id == "U123"))
        assert row.user.email == "alice@example.com"
    assert runner.invoke(args=["connectors", "link", "slack", "U9", "nobody@example.com"]).exit_code != 0
