"""`uvicorn app.mcp.asgi:app`: the MCP server as its own process, configured like the web app."""

from app import create_app
from app.mcp import create_mcp_app

app = create_mcp_app(create_app())
