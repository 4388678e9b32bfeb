"""`uvicorn asgi:app`: MCP and the streamed turns (app/asgi.py), configured like the web app."""

from app import create_app
from app.asgi import create_asgi_app

app = create_asgi_app(create_app())
