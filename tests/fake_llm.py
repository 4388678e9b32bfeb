"""Local fake model servers on loopback, speaking the OpenAI Chat Completions and the
Anthropic Messages wire formats. Each answers from a script queued by the test and records
every request it was sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response


class FakeServer:
    """A scripted HTTP server. enqueue() a dict (JSON body), or a (status, body) pair, or a
    callable(request_json) -> Response; "hang" answers only when the server stops, so the
    client's timeout always fires first, however busy the machine is."""

    path = "/"

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.httpd = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.released = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.thread.join(timeout=5)

    def enqueue(self, *items: Any) -> FakeServer:
        self.script.extend(items)
        return self

    def seen(self) -> str:
        return json.dumps(self.requests, ensure_ascii=False)

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        body = request.get_json(silent=True) or {}
        self.requests.append(body)
        item = self.script.pop(0) if self.script else self.reply_text("(script is empty)")
        if item == "hang":
            self.released.wait(60)
            item = self.reply_text("too late")
        if isinstance(item, tuple):
            status, payload = item
            response = Response(payload if isinstance(payload, str) else json.dumps(payload), status=status,
                                content_type="application/json")
        elif callable(item):
            response = item(body)
        else:
            response = Response(json.dumps(item), content_type="application/json")
        return response(environ, start_response)

    def reply_text(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def reply_tools(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
        raise NotImplementedError


class FakeOpenAI(FakeServer):
    """POST {base}/v1/chat/completions."""

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1"

    def _completion(self, message: dict[str, Any], finish: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": "fake-gpt", "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                              "logprobs": None}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }

    def reply_text(self, text: str) -> dict[str, Any]:
        return self._completion({"role": "assistant", "content": text}, "stop")

    def reply_tools(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
        tool_calls = [{"id": f"call_{i}_{len(self.script)}", "type": "function",
                       "function": {"name": name, "arguments": json.dumps(args)}}
                      for i, (name, args) in enumerate(calls)]
        return self._completion({"role": "assistant", "content": text or None, "tool_calls": tool_calls},
                                "tool_calls")


class FakeAnthropic(FakeServer):
    """POST {base}/v1/messages."""

    def _message(self, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant", "model": "fake-claude",
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 13, "output_tokens": 5}}

    def reply_text(self, text: str) -> dict[str, Any]:
        return self._message([{"type": "text", "text": text}], "end_turn")

    def reply_tools(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
        content = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": f"toolu_{i}_{len(self.script)}", "name": name, "input": args}
                    for i, (name, args) in enumerate(calls)]
        return self._message(content, "tool_use")
