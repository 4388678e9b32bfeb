"""A small asyncio HTTP/1.1 client for the load benchmarks: one request on a new connection, and a
Server-Sent Events reader that notes when each event arrived (time.monotonic(), CLOCK_MONOTONIC,
the clock bench/fake_model.py stamps its chunks with). Thousands of connections cost one thread."""

from __future__ import annotations

import asyncio
import json
import resource
import time
from typing import Any

HOST = "127.0.0.1"


def raise_open_files(wanted: int) -> int:
    """Raise this process's open-file limit towards `wanted` (up to the hard limit); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class HTTPError(Exception):
    pass


def _head(method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", *(f"{k}: {v}" for k, v in headers.items())]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise HTTPError(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = bytearray()
        while chunk := await _chunk(reader):
            out += chunk
        return bytes(out)
    return await reader.read()


async def _chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked body (b"" at its end)."""
    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
    if size == 0:
        await reader.readuntil(b"\r\n")
        return b""
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def request(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    """One request on a new connection (closed after); the status, headers and JSON body (or text)."""
    data = b"" if body is None else json.dumps(body).encode()
    sent = {"Connection": "close", **({"Content-Type": "application/json"} if body is not None else {}), **(headers or {})}
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(_head(method, path, sent, data))
        await writer.drain()
        status, got = await _read_head(reader)
        raw = await _read_body(reader, got)
    finally:
        writer.close()
    try:
        return status, got, json.loads(raw) if raw else None
    except ValueError:
        return status, got, raw.decode(errors="replace")


class EventStream:
    """An open `text/event-stream` response; next_event() gives each event (a dict of its fields:
    id, event, data, retry; a comment-only block gives {"comment": ...}) with when it arrived."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunked: bool) -> None:
        self.reader, self.writer, self.chunked = reader, writer, chunked
        self.buffer = bytearray()
        self.ended = False

    @classmethod
    async def open(cls, port: int, path: str, headers: dict[str, str], method: str = "GET", body: Any = None) -> EventStream:
        """GET the stream, or (`method="POST"`, a JSON `body`) post a request whose answer is one."""
        reader, writer = await asyncio.open_connection(HOST, port)
        data = b"" if body is None else json.dumps(body).encode()
        sent = {"Accept": "text/event-stream", **({"Content-Type": "application/json"} if body is not None else {}), **headers}
        try:
            writer.write(_head(method, path, sent, data))
            await writer.drain()
            status, got = await _read_head(reader)
            if status != 200 or not got.get("content-type", "").startswith("text/event-stream"):
                body = await asyncio.wait_for(_read_body(reader, got), 5)
                raise HTTPError(f"{method} {path}: {status} {got.get('content-type')} {body[:200]!r}")
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, got.get("transfer-encoding", "").lower() == "chunked")

    async def _more(self) -> bool:
        if self.ended:
            return False
        data = await _chunk(self.reader) if self.chunked else await self.reader.read(65536)
        if not data:
            self.ended = True
            return False
        self.buffer += data
        return True

    async def next_event(self) -> tuple[float, dict[str, str]] | None:
        """The next event and the time.monotonic() its last byte was read; None at the stream's end."""
        while True:
            end = self.buffer.find(b"\n\n")
            if end >= 0:
                block = bytes(self.buffer[:end]).decode()
                del self.buffer[: end + 2]
                return time.monotonic(), _parse(block)
            if not await self._more():
                return None

    def close(self) -> None:
        self.writer.close()


def _parse(block: str) -> dict[str, str]:
    event: dict[str, str] = {}
    for line in block.split("\n"):
        if line.startswith(":"):
            event["comment"] = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        event[name] = f"{event[name]}\n{value}" if name == "data" and name in event else value
    return event
