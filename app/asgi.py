"""The ASGI process beside the web's gunicorn (`uvicorn asgi:app`): MCP at /mcp, and a message
answered with its own turn (`POST /api/conversations/<id>/messages`, app/api/turn_server.py),
whose pass runs on this process's event loop. Stopping, its passes get TURN_TIMEOUT to end."""

from __future__ import annotations

import asyncio
import re

from flask import Flask
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import copilot
from app.api.turn_server import TurnServer
from app.mcp import create_mcp_app

MESSAGES = re.compile(r"/api/conversations/\d+/messages")


class AsgiApp:
    """The ASGI app: the turn server for its one route, MCP for the rest."""

    def __init__(self, flask_app: Flask) -> None:
        self.flask_app = flask_app
        self.mcp: ASGIApp = create_mcp_app(flask_app)
        self.turns = TurnServer(flask_app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, _lifespan(self.flask_app, self.turns, receive), send)
        elif scope["type"] == "http" and scope["method"] == "POST" and MESSAGES.fullmatch(scope["path"]):
            await self.turns(scope, receive, send)
        else:
            await self.mcp(scope, receive, send)


def create_asgi_app(flask_app: Flask) -> AsgiApp:
    return AsgiApp(flask_app)


def _lifespan(flask_app: Flask, turns: TurnServer, receive: Receive) -> Receive:
    """MCP's lifespan, with the pass's modules loaded as the process starts (not on its first pass)
    and this server's passes given their time to end before it stops."""

    async def passed_on() -> Message:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await asyncio.to_thread(copilot.preload, flask_app)
            copilot.tune_collector()
        elif message["type"] == "lifespan.shutdown":
            await turns.close(float(flask_app.config["TURN_TIMEOUT"]))
        return message

    return passed_on
