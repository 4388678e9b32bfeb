"""flask mcp: serve the ASGI process (MCP, and messages answered with their own turn) over this
app's database and actions."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("mcp")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8765, type=int)
@with_appcontext
def mcp_command(host: str, port: int) -> None:
    """Serve MCP (streamable HTTP at /mcp) and streamed turns (POST /api/conversations/<id>/messages
    with Accept: text/event-stream, whose pass runs in this process) with uvicorn: `uvicorn asgi:app`."""
    import contextvars

    import uvicorn

    from app.asgi import create_asgi_app

    served = create_asgi_app(current_app._get_current_object())  # type: ignore[attr-defined]
    # Served outside this command's app context, as `uvicorn asgi:app` is: every request and pass
    # pushes its own (one left current here would be every request's, and its `g` with it). The
    # client's address is the app's to take from X-Forwarded-For (TRUSTED_PROXIES), not uvicorn's.
    contextvars.Context().run(uvicorn.run, served, host=host, port=port, proxy_headers=False)
