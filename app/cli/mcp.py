"""flask mcp: serve MCP over this app's database and actions."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("mcp")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8765, type=int)
@with_appcontext
def mcp_command(host: str, port: int) -> None:
    """Serve MCP (streamable HTTP at /mcp) with uvicorn, over this app's database and actions."""
    import uvicorn

    from app.mcp import create_mcp_app

    uvicorn.run(create_mcp_app(current_app._get_current_object()), host=host, port=port)  # type: ignore[attr-defined]
