"""The MCP tests' server process, clients and tokens (tests/test_mcp.py and the adversarial MCP
tests): the SDK's own client, over real HTTP, to a `flask mcp` process of our own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx2
import pytest
import sqlalchemy as sa
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from app.auth import create_token
from app.extensions import db
from app.models import User
from tests.conftest import REDIS_URL
from tests.services import WAIT, free_port, wait_for_port

PUBLIC = "http://127.0.0.1:5099"  # the links' public address (printed in links, never listened on)
# httpx's default is 5 s per read: a loaded machine's server process (its first request imports
# and connects) may take longer than that to answer, which is slow, not broken.
HTTP_TIMEOUT = httpx2.Timeout(60)


class McpServer:
    """`flask --app wsgi mcp` in a process of its own, on the tests' database."""

    def __init__(self, database_url):
        self.port = free_port()
        self.env = {
            **os.environ,
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "test-secret-key",
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "SWEEP_ON_START": "0",
            "PUBLIC_URL": PUBLIC,
            "RATELIMIT_ENABLED": "0",
        }
        self.proc = None
        self.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/mcp"

    def command(self):
        return [sys.executable, "-m", "flask", "--app", "wsgi", "mcp", "--port", str(self.port)]

    def start(self):
        self.proc = subprocess.Popen(
            self.command(),
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # A start takes a few seconds on a quiet machine and was seen to take 48 s on a loaded one;
        # a process that exits fails at once (wait_for_port watches it).
        wait_for_port(self.port, 180, self.proc)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=WAIT)

    def running(self):
        """The process, started again when a test stopped it (one that kills it on purpose, or
        one whose process died): the next test gets a server that answers."""
        if self.proc.poll() is not None:
            self.start()
        return self


# `flask mcp`, with the app's SQLite connections giving up on a write lock after 0.2 s (theirs is
# 30 s): a write that meets a lock the test holds fails within the test, whatever the machine's speed.
SHORT_LOCK_WAIT = """
import contextvars, sys, uvicorn
from app import create_app
from app.asgi import create_asgi_app
app = create_app({"SQLALCHEMY_ENGINE_OPTIONS": {"connect_args": {"timeout": 0.2}}})
served = create_asgi_app(app)
contextvars.Context().run(uvicorn.run, served, host="127.0.0.1", port=int(sys.argv[1]), proxy_headers=False)
"""


class ShortLockWait(McpServer):
    """The MCP process whose SQLite writes wait 0.2 s for a lock, then fail (SHORT_LOCK_WAIT)."""

    def command(self):
        return [sys.executable, "-c", SHORT_LOCK_WAIT, str(self.port)]


def module_server(kind=McpServer, name="server"):
    """The fixtures `mcp_process` and `server` (a test module imports both; with another `name`,
    `<name>_process` and `<name>`): one `kind` process per test module, shared by its tests. Each
    test still starts from fresh data (the `app` fixture empties the tables and Redis before it,
    and every test makes its own tokens), and the process keeps nothing between requests but its
    MCP sessions, each bound to a token no later test holds."""
    process_name = "mcp_process" if name == "server" else f"{name}_process"

    @pytest.fixture(scope="module", name=process_name)
    def mcp_process(database_url) -> Iterator[McpServer]:
        server = kind(database_url)
        yield server
        server.kill()

    @pytest.fixture(name=name)
    def server(request, app) -> McpServer:
        return request.getfixturevalue(process_name).running()

    return mcp_process, server


mcp_process, server = module_server()


@pytest.fixture
def tokens(app):
    """Each person's agent-scoped token: what an MCP client is given (the default scope)."""
    with app.app_context():
        return {u.email.split("@")[0]: create_token(u) for u in db.session.scalars(sa.select(User))}


@pytest.fixture
def clients(app):
    """Each person's client-scoped token: the person's own app, which may fill forms itself."""
    with app.app_context():
        return {u.email.split("@")[0]: create_token(u, scope="client") for u in db.session.scalars(sa.select(User))}


@contextlib.asynccontextmanager
async def client(server, token, callback=None):
    """The SDK's client over streamable HTTP, with the person's token."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=HTTP_TIMEOUT) as http:
        async with Client(streamable_http_client(server.url, http_client=http), elicitation_callback=callback) as c:
            yield c


def run(coro):
    return asyncio.run(coro)


async def never(context, params):
    raise AssertionError("the test drives the legs by hand")


def first_leg(server, token, name, arguments):
    async def main():
        async with client(server, token, never) as c:
            return await c.session.call_tool(name, arguments, allow_input_required=True)

    return run(main())


def retry_leg(server, token, name, arguments, state, responses=None):
    """The retry of a call that asked for input: the same call with its request state and answers."""

    async def main():
        async with client(server, token, never) as c:
            return await c.session.call_tool(
                name, arguments, input_responses=responses, request_state=state, allow_input_required=True
            )

    return run(main())
