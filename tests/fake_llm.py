"""Local fake model servers on loopback, speaking the OpenAI Chat Completions and the
Anthropic Messages wire formats. Each answers from a script queued by the test and records
every request it was sent. A request with "stream": true is answered the way the real API
streams (Server-Sent Events), built from the same scripted answer."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response


def words(text: str) -> list[str]:
    """Text in word-sized pieces (each with its trailing space), so a stream really comes in parts."""
    return re.findall(r"\s*\S+\s*|\s+", text)


def pieces(text: str, size: int = 8) -> list[str]:
    """A tool call's JSON arguments in fixed-size pieces, cut anywhere, the way models send them."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


class FakeServer:
    """A scripted HTTP server. enqueue() a dict (the JSON body of a complete answer; a streamed
    request gets it as the equivalent event stream), or a (status, body) pair (sent as it is, as
    JSON, streamed request or not, the way the real APIs send an error), or a
    callable(request_json) -> Response; "hang" answers only when the server stops, before any
    byte of an answer, so the client's timeout always fires first, however busy the machine is."""

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
            response = Response(
                payload if isinstance(payload, str) else json.dumps(payload), status=status, content_type="application/json"
            )
        elif callable(item):
            response = item(body)
        elif body.get("stream") is True:
            response = Response(self.stream(item, body), content_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        else:
            response = Response(json.dumps(item), content_type="application/json")
        return response(environ, start_response)

    def stream(self, answer: dict[str, Any], request: dict[str, Any]) -> Iterator[str]:
        """The complete answer, as the events the real API streams for it."""
        raise NotImplementedError

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
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake-gpt",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }

    def reply_text(self, text: str) -> dict[str, Any]:
        return self._completion({"role": "assistant", "content": text}, "stop")

    def reply_tools(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
        tool_calls = [
            {"id": f"call_{i}_{len(self.script)}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ]
        return self._completion({"role": "assistant", "content": text or None, "tool_calls": tool_calls}, "tool_calls")

    def stream(self, answer: dict[str, Any], request: dict[str, Any]) -> Iterator[str]:
        """chat.completion.chunk objects: the role, the text in pieces, each tool call (its id and
        name, then its arguments in pieces), the finish reason, the usage if it was asked for
        (stream_options.include_usage), then [DONE]."""
        with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        choice = answer["choices"][0]
        message = choice["message"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data = {
                "id": answer["id"],
                "object": "chat.completion.chunk",
                "created": answer["created"],
                "model": answer["model"],
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if with_usage:
                data["usage"] = None
            return sse(data)

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in words(message.get("content") or ""):
            yield chunk({"content": piece})
        for index, call in enumerate(message.get("tool_calls") or []):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in pieces(call["function"]["arguments"]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, choice["finish_reason"])
        if with_usage:
            yield sse(
                {
                    "id": answer["id"],
                    "object": "chat.completion.chunk",
                    "created": answer["created"],
                    "model": answer["model"],
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": answer["usage"],
                }
            )
        yield sse("[DONE]")


class FakeAnthropic(FakeServer):
    """POST {base}/v1/messages."""

    def _message(self, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": "fake-claude",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 13, "output_tokens": 5},
        }

    def reply_text(self, text: str) -> dict[str, Any]:
        return self._message([{"type": "text", "text": text}], "end_turn")

    def reply_tools(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
        content = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}_{len(self.script)}", "name": name, "input": args}
            for i, (name, args) in enumerate(calls)
        ]
        return self._message(content, "tool_use")

    def stream(self, answer: dict[str, Any], request: dict[str, Any]) -> Iterator[str]:
        """message_start (no content yet), then per block content_block_start, its deltas (text_delta
        pieces, or input_json_delta pieces of a tool call's input) and content_block_stop, then
        message_delta (stop reason, output usage) and message_stop; a ping as the real API sends."""

        def event(kind: str, **data: Any) -> str:
            return sse({"type": kind, **data}, event=kind)

        usage = answer["usage"]
        yield event(
            "message_start",
            message={**answer, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}},
        )
        for index, block in enumerate(answer["content"]):
            if block["type"] == "text":
                yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                deltas = [{"type": "text_delta", "text": piece} for piece in words(block["text"])]
            else:
                yield event(
                    "content_block_start",
                    index=index,
                    content_block={"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                )
                deltas = [
                    {"type": "input_json_delta", "partial_json": piece} for piece in ["", *pieces(json.dumps(block["input"]))]
                ]
            if index == 0:
                yield event("ping")
            for delta in deltas:
                yield event("content_block_delta", index=index, delta=delta)
            yield event("content_block_stop", index=index)
        yield event(
            "message_delta",
            delta={"stop_reason": answer["stop_reason"], "stop_sequence": None},
            usage={"output_tokens": usage["output_tokens"]},
        )
        yield event("message_stop")
