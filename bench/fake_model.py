"""A fake OpenAI-compatible model for the load benchmarks, on 127.0.0.1, one asyncio process.

    python bench/fake_model.py [--port 0] [--seconds 2] [--words 20]

It answers `POST …/chat/completions` after `--seconds`, whatever it is asked (plain text, no tool
calls). With `"stream": true` it streams Server-Sent Events like the real API (`data:
{chat.completion.chunk}` lines, a usage chunk when `stream_options.include_usage`, then `data:
[DONE]`), its words spread evenly over those seconds (word i of n sent at (i+1)/n of the delay);
without, it sends the whole completion at the end. A request whose last user message contains
"[warm]" is answered at once (warming workers up costs no model time).

Each request is recorded: the `person-<k>` tag found in its last user message, when it arrived and
when each chunk was written (`time.monotonic()`, CLOCK_MONOTONIC: one clock for every process on
this machine), and the first words it sent (`Reply-<n> `, n its request number, so a stream
reader can tell which request its first words came from). `GET /_stats` answers them as JSON,
with the most requests it had in flight at once. It prints `port <n>` when it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

TAG = re.compile(r"person-(\d+)")
WORDS = (
    "the",
    "quick",
    "answer",
    "arrives",
    "in",
    "parts",
    "so",
    "the",
    "person",
    "reads",
    "it",
    "as",
    "it",
    "is",
    "written",
    "and",
    "never",
    "waits",
    "for",
    "the",
    "whole",
)


class Fake:
    """The server's state: its settings, the requests it saw, how many are in flight."""

    def __init__(self, seconds: float, words: int) -> None:
        self.seconds = seconds
        self.words = max(1, words)
        self.records: list[dict[str, Any]] = []
        self.inflight = 0
        self.max_inflight = 0

    def stats(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "words": self.words, "max_inflight": self.max_inflight, "requests": self.records}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive connection: requests one after another until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, headers = _parse_head(head)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "GET" and path == "/_stats":
                    await _send_json(writer, 200, self.stats())
                elif method == "POST" and path.endswith("/chat/completions"):
                    await self.complete(json.loads(body or b"{}"), writer)
                else:
                    await _send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def complete(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        asked = _last_user_text(request.get("messages") or [])
        tag = TAG.search(asked)
        record: dict[str, Any] = {
            "n": len(self.records) + 1,
            "person": int(tag.group(1)) if tag else None,
            "stream": bool(request.get("stream")),
            "arrived": time.monotonic(),
            "sent": [],
        }
        self.records.append(record)
        delay = 0.0 if "[warm]" in asked else self.seconds
        words = [f"Reply-{record['n']} "] + [f"{WORDS[i % len(WORDS)]} " for i in range(self.words - 1)]
        record["first_words"] = words[0]
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if record["stream"]:
                await self._stream(request, record, words, delay, writer)
            else:
                await asyncio.sleep(delay)
                await _send_json(writer, 200, _completion(record["n"], request, "".join(words).strip()))
                record["sent"].append(time.monotonic())
        finally:
            self.inflight -= 1

    async def _stream(
        self, request: dict[str, Any], record: dict[str, Any], words: list[str], delay: float, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await _event(writer, _chunk(record["n"], request, {"role": "assistant", "content": ""}, None))
        start = time.monotonic()
        for i, word in enumerate(words):
            await asyncio.sleep(max(0.0, start + delay * (i + 1) / len(words) - time.monotonic()))
            await _event(writer, _chunk(record["n"], request, {"content": word}, None))
            record["sent"].append(time.monotonic())
        await _event(writer, _chunk(record["n"], request, {}, "stop"))
        if (request.get("stream_options") or {}).get("include_usage"):
            await _event(writer, {**_chunk(record["n"], request, {}, None), "choices": [], "usage": _usage(len(words))})
        await _event(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


async def _send_json(writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    reason = "OK" if status == 200 else "Not Found"
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    )
    await writer.drain()


async def _event(writer: asyncio.StreamWriter, payload: Any) -> None:
    """One SSE event as one HTTP chunk."""
    data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


def _usage(words: int) -> dict[str, int]:
    return {"prompt_tokens": 50, "completion_tokens": words, "total_tokens": 50 + words}


def _chunk(n: int, request: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _completion(n: int, request: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}],
        "usage": _usage(len(text.split())),
    }


async def main(port: int, seconds: float, words: int) -> None:
    fake = Fake(seconds, words)
    server = await asyncio.start_server(fake.serve, "127.0.0.1", port, backlog=4096, limit=1 << 22)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--words", type=int, default=20)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.port, args.seconds, args.words))
    except KeyboardInterrupt:
        pass
