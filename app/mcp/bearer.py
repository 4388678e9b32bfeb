"""Who calls over MCP: every request's bearer token (a personal access token), read before the
SDK sees the request, and named to the SDK as the request's principal."""

from __future__ import annotations

import contextvars
import logging

import anyio
from flask import Flask
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import ServiceUnavailable
from app.extensions import DATABASE_AWAY

log = logging.getLogger(__name__)
current_token: contextvars.ContextVar[int | None] = contextvars.ContextVar("countersign_mcp_token", default=None)


def principal() -> str | None:
    """The request's token as the SDK's principal ("pat:<id>"), or None outside a request."""
    token = current_token.get()
    return None if token is None else f"pat:{token}"


class BearerAuth:
    """Every request carries a personal access token (Authorization: Bearer); 401 otherwise.
    The token is also the request's `user` for the SDK, which binds a handshake-era session
    (Mcp-Session-Id) to the token whose initialize opened it: another token's POST, GET or
    DELETE on that id is 404 "Session not found", the same answer as for an unknown id."""

    def __init__(self, app: ASGIApp, flask_app: Flask) -> None:
        self.app, self.flask_app = app, flask_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        try:
            token_id = (
                await anyio.to_thread.run_sync(self._token_id, auth[7:].strip()) if auth.lower().startswith("bearer ") else None
            )
        except DATABASE_AWAY as error:  # (the token cannot be read: neither let in nor refused)
            log.error("database error reading an MCP request's token: %s", error)
            await JSONResponse(
                {"error": "service_unavailable", "message": ServiceUnavailable.message},
                status_code=ServiceUnavailable.status,
                headers={"Retry-After": "1"},
            )(scope, receive, send)
            return
        if token_id is None:
            await JSONResponse(
                {"error": "unauthorized", "message": "Send Authorization: Bearer <token>."},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )(scope, receive, send)
            return
        reset = current_token.set(token_id)
        try:
            await self.app({**scope, "user": _session_owner(token_id)}, receive, send)
        finally:
            current_token.reset(reset)

    def _token_id(self, token: str) -> int | None:
        from app.auth import find_token
        from app.extensions import db

        with self.flask_app.app_context():
            row = find_token(token)
            result = row.id if row is not None else None
            db.session.remove()
            return result


def _session_owner(token_id: int) -> AuthenticatedUser:
    """The token as the SDK's principal ("pat:<id>", never the secret): the SDK records it when a
    session opens, compares it on every later request, and forgets it when the session ends."""
    principal = f"pat:{token_id}"
    return AuthenticatedUser(AccessToken(token=principal, client_id=principal, scopes=[]))
