"""Local fakes of the chat services Countersign talks to: the Telegram Bot API, the Slack Web API
(real HTTP on loopback) and an SMTP server (aiosmtpd), each recording what it received; and `Chat`,
which posts webhooks as each service (and a person's mail client) would, signed as they sign."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from email import message_from_bytes
from typing import Any

import pytest
import sqlalchemy as sa
from aiosmtpd.controller import Controller
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.services import free_port

SLACK_SECRET = "slack-signing-secret"
TELEGRAM_SECRET = "telegram-secret-token"
EMAIL_SECRET = "email-webhook-secret"
IDS = {
    "telegram": {"alice": "111", "bob": "222", "carol": "333"},
    "slack": {"alice": "U111", "bob": "U222", "carol": "U333"},
    "email": {"alice": "alice@example.com", "bob": "bob@example.com", "carol": "carol@example.com"},
}
counter = itertools.count(1000)  # ids of messages, updates and emails; Telegram's for the bot's messages and the people's alike
_clock = threading.Lock()
_last_ts = [0.0]


def slack_ts() -> str:
    """A Slack message's ts: one clock for the people's messages and the app's, strictly
    increasing, as Slack's own within a channel."""
    with _clock:
        _last_ts[0] = max(time.time(), _last_ts[0] + 0.000001)
        return f"{_last_ts[0]:.6f}"


class FakeChatApi:
    """Answers POST /bot<token>/sendMessage (Telegram) and /chat.postMessage (Slack) as they do."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.refuse: str | None = None  # set: Slack refuses every message with blocks (a card), with this error
        self.httpd = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.thread.join(timeout=5)

    def app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        body = request.get_json(silent=True) or {}
        self.posts.append({"path": request.path, "auth": request.headers.get("Authorization", ""), **body})
        if request.path.endswith("/conversations.open"):  # a user's DM channel, as Slack names it
            reply = {"ok": True, "channel": {"id": f"D{body.get('users', '')}"}}
        elif request.path.endswith("/sendMessage") and len(str(body.get("text", ""))) > 4096:
            # Telegram's answer to a message over its 4096 characters: HTTP 400, nothing sent.
            reply = {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}
            return Response(json.dumps(reply), status=400, content_type="application/json")(environ, start_response)
        elif request.path.endswith("/sendMessage"):
            reply = {
                "ok": True,
                "result": {"message_id": next(counter), "chat": {"id": body.get("chat_id")}, "text": body.get("text")},
            }
            self.posts[-1]["sent_as"] = reply["result"]["message_id"]
        elif body.get("blocks") and (
            self.refuse or len(body["blocks"]) > 50 or any(len(_text_of(b)) > 3000 for b in body["blocks"])
        ):
            # Slack's answer to blocks it cannot take (a section's text is 3000 characters at most):
            # HTTP 200, "ok": false, nothing posted.
            reply = {"ok": False, "error": self.refuse or "invalid_blocks"}
        else:
            reply = {"ok": True, "channel": body.get("channel"), "ts": slack_ts()}
            self.posts[-1]["sent_as"] = reply["ts"]
        return Response(json.dumps(reply), content_type="application/json")(environ, start_response)


def _text_of(block: Any) -> str:
    text = block.get("text") if isinstance(block, dict) else None
    return str(text.get("text") or "") if isinstance(text, dict) else ""


class Inbox:
    """aiosmtpd handler keeping every message."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.refuse: str | None = None  # set: every message is refused with this reply

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        if self.refuse:
            return self.refuse
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


class FakeSmtp:
    def __init__(self) -> None:
        self.inbox = Inbox()
        # aiosmtpd's default ready_timeout is 5 s: a loaded machine may take longer to start its thread.
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=free_port(), ready_timeout=60)
        self.controller.start()

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.controller.port}"

    def close(self) -> None:
        self.controller.stop()


def queued_jobs(app: Any) -> int:
    """Jobs waiting in the queues (deliveries and turns) for a worker."""
    from app.copilot.turns import _jobs as jobs

    broker = app.extensions["turns"].broker
    return sum(broker.do_qsize(queue) for queue in (jobs.QUEUE, jobs.TASKS))


def connector_config(api: FakeChatApi, smtp: FakeSmtp) -> dict[str, Any]:
    """Settings that point every connector at the fakes."""
    return {
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "TELEGRAM_WEBHOOK_SECRET": TELEGRAM_SECRET,
        "TELEGRAM_API_BASE": api.base_url,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SLACK_SECRET,
        "SLACK_API_BASE": api.base_url,
        "EMAIL_WEBHOOK_SECRET": EMAIL_SECRET,
        "SMTP_URL": smtp.url,
        "MAIL_FROM": "copilot@countersign.example",
        "PUBLIC_URL": "https://countersign.example",
        # Deliveries and turns go through the real queue (Dramatiq on the tests' Redis);
        # Chat.work() is the worker.
        "TURNS_RUNNER": "dramatiq",
    }


def slack_headers(body: str | bytes, stamp: int | None = None, secret: str = SLACK_SECRET) -> dict[str, str]:
    """Slack's v0 signature: HMAC-SHA256 of "v0:<timestamp>:<body>"."""
    raw = body.encode() if isinstance(body, str) else body
    when = str(stamp if stamp is not None else int(time.time()))
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{when}:".encode() + raw, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": when, "X-Slack-Signature": signature}


def email_headers(body: str | bytes, stamp: int | None = None, secret: str = EMAIL_SECRET) -> dict[str, str]:
    """The mail provider's signature: HMAC-SHA256 of "<timestamp>.<body>", timestamp in its own header."""
    raw = body.encode() if isinstance(body, str) else body
    when = str(stamp if stamp is not None else int(time.time()))
    signature = "sha256=" + hmac.new(secret.encode(), f"{when}.".encode() + raw, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Countersign-Timestamp": when, "X-Countersign-Signature": signature}


def passing_verdict(address: str) -> dict[str, str]:
    """What the mail provider adds for mail that really comes from `address`: its receiving server's
    Authentication-Results, passing SPF, DKIM and DMARC for the address's own domain."""
    domain = address.rpartition("@")[2]
    return {
        "authentication_results": f"mx.countersign.example; spf=pass smtp.mailfrom={address}; "
        f"dkim=pass header.d={domain}; dmarc=pass (p=REJECT) header.from={domain}"
    }


class Chat:
    """One connector seen from the outside: post webhooks as the service would, read what came back.
    Email replies are written as a mail client writes them: to the newest email the person got in
    that thread (In-Reply-To its Message-ID, References its References and its Message-ID), and
    reach the webhook with the provider's passing verdict for the person's domain."""

    def __init__(self, app: Any, name: str, services: tuple[FakeChatApi, FakeSmtp]) -> None:
        from app.extensions import db
        from app.models import ConnectorIdentity, User

        self.app, self.name = app, name
        self.api, self.smtp = services
        self.api.posts.clear()
        self.smtp.inbox.messages.clear()
        self.roots: dict[str, str] = {}
        self.stamps: dict[Any, str] = {}
        with app.app_context():
            for person, external in IDS[name].items():
                user = db.session.scalar(sa.select(User).where(User.email == f"{person}@example.com"))
                db.session.add(ConnectorIdentity(connector=name, external_id=external, user_id=user.id))
            db.session.commit()

    def say(
        self, text: str, who: str = "alice", thread: str = "main", files: bool = False, redeliver: Any = None, **mail: Any
    ) -> Any:
        body, headers = self.webhook(text, who, thread, files, redeliver, **mail)
        response = self.app.test_client().post(self.url, data=body, headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        self.work()
        return response

    def webhook(
        self, text: str, who: str = "alice", thread: str = "main", files: bool = False, redeliver: Any = None, **mail: Any
    ) -> tuple[str, dict[str, str]]:
        """The body and headers the service would post."""
        return getattr(self, f"_{self.name}")(text, who, thread, files, redeliver, **mail)

    def work(self) -> None:
        """What the worker does, in-process: run the queued deliveries and turns until none is left.
        A connection error while Redis answers is a dropped connection, and a worker takes up its
        jobs again (they wait in Redis), as this does; only a Redis that is down (the tests that stop
        it) leaves nothing to run: the webhook answered inline, nothing was queued."""
        import redis

        from app.copilot.turns import _jobs as jobs

        for _ in range(3):
            try:
                jobs.drain(self.app)
                return
            except redis.exceptions.ConnectionError:
                try:
                    self.app.extensions["turns"].broker.client.ping()
                except redis.exceptions.RedisError:
                    return  # down
        jobs.drain(self.app)  # (a fourth try: an error now is the test's)

    @property
    def url(self) -> str:
        return {"telegram": "/connectors/telegram", "slack": "/connectors/slack/events", "email": "/connectors/email/inbound"}[
            self.name
        ]

    def _telegram(
        self, text: str, who: str, thread: str, files: bool, redeliver: Any, **extra: Any
    ) -> tuple[str, dict[str, str]]:
        update_id = redeliver or next(counter)
        message = {
            "message_id": update_id,
            "from": {"id": int(IDS["telegram"][who]), "is_bot": False, "first_name": who},
            "chat": {"id": {"main": -1001, "other": -1002}[thread], "type": "group"},
            "date": int(time.time()),
            **extra,
        }
        if files:
            message["document"] = {"file_id": "F1", "file_name": "report.pdf"}
        if text:
            message["caption" if files else "text"] = text
        body = json.dumps({"update_id": update_id, "message": message})
        return body, {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET}

    def _slack(self, text: str, who: str, thread: str, files: bool, redeliver: Any, **extra: Any) -> tuple[str, dict[str, str]]:
        event_id = redeliver or f"Ev{next(counter)}"
        ts = self.stamps.setdefault(event_id, slack_ts())  # a retry is the same message
        event = {
            "type": "message",
            "channel": {"main": "C1", "other": "C2"}[thread],
            "user": IDS["slack"][who],
            "text": text,
            "ts": ts,
            "thread_ts": "1700000000.000100",
            **extra,
        }
        if files:
            event.update(subtype="file_share", files=[{"id": "F1", "name": "report.pdf"}])
        body = json.dumps(
            {
                "type": "event_callback",
                "team_id": "T1",
                "api_app_id": "A1",
                "event": event,
                "event_id": event_id,
                "event_time": int(time.time()),
            }
        )
        return body, slack_headers(body)

    def _email(self, text: str, who: str, thread: str, files: bool, redeliver: Any, **extra: Any) -> tuple[str, dict[str, str]]:
        message_id = redeliver or f"<m{next(counter)}@example.com>"
        root = self.roots.setdefault(thread, message_id)
        in_reply_to, references = ("", "") if root == message_id else (root, root)
        got = [m for m in self.smtp.inbox.messages if m["To"] == IDS["email"][who] and m["In-Reply-To"] == root]
        if got and root != message_id:
            in_reply_to, references = got[-1]["Message-ID"], f"{got[-1]['References']} {got[-1]['Message-ID']}"
        mail = {
            "from": f"{who.title()} <{IDS['email'][who]}>",
            "to": "copilot@countersign.example",
            "subject": "Re: Blog cleanup",
            "text": text,
            "message_id": message_id,
            "in_reply_to": in_reply_to,
            "references": references,
            "attachments": [{"filename": "report.pdf"}] if files else [],
            **passing_verdict(IDS["email"][who]),
            **extra,
        }  # the person's own mail passes; tests forge the rest
        body = json.dumps(mail)
        return body, email_headers(body)

    def sent(self, thread: str = "main") -> list[str]:
        """Texts posted back into that thread."""
        if self.name == "email":
            root = self.roots.get(thread)
            return [m.get_payload().strip() for m in self.smtp.inbox.messages if m["In-Reply-To"] == root]
        want = {"telegram": {"main": -1001, "other": -1002}, "slack": {"main": "C1", "other": "C2"}}[self.name][thread]
        key = "chat_id" if self.name == "telegram" else "channel"
        return [p["text"] for p in self.api.posts if p.get(key) == want]


def chat_fixtures() -> tuple[Any, Any, Any]:
    """The connector tests' fixtures, for a test module to take as its own:
    `services, app_config, chat = chat_fixtures()` — the fake chat API and SMTP server (one per
    module), the settings that point the app at them, and a Chat for each connector."""

    @pytest.fixture(scope="module")
    def services() -> Any:
        api, smtp = FakeChatApi(), FakeSmtp()
        yield api, smtp
        api.close()
        smtp.close()

    @pytest.fixture
    def app_config(services: Any) -> dict[str, Any]:
        return connector_config(*services)

    @pytest.fixture(params=["telegram", "slack", "email"])
    def chat(request: Any, app: Any, services: Any) -> Chat:
        return Chat(app, request.param, services)

    return services, app_config, chat
