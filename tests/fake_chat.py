"""Local fakes of the chat services Countersign posts to: the Telegram Bot API, the Slack Web API
(real HTTP on loopback) and an SMTP server (aiosmtpd). Each records what it received."""

from __future__ import annotations

import json
import threading
from email import message_from_bytes
from typing import Any

from aiosmtpd.controller import Controller
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.services import free_port


class FakeChatApi:
    """Answers POST /bot<token>/sendMessage (Telegram) and /chat.postMessage (Slack) as they do."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
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
        if request.path.endswith("/sendMessage"):
            reply = {"ok": True, "result": {"message_id": len(self.posts), "chat": {"id": body.get("chat_id")},
                                            "text": body.get("text")}}
        else:
            reply = {"ok": True, "channel": body.get("channel"), "ts": f"17000000{len(self.posts)}.0001"}
        return Response(json.dumps(reply), content_type="application/json")(environ, start_response)


class Inbox:
    """aiosmtpd handler keeping every message."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


class FakeSmtp:
    def __init__(self) -> None:
        self.inbox = Inbox()
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=free_port())
        self.controller.start()

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.controller.port}"

    def close(self) -> None:
        self.controller.stop()
