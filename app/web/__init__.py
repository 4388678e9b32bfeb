"""The browser: conversations, the chat page, and the card's answers (htmx).

Only the wiring: each view module adds its views to the blueprint `bp` as it is imported."""

from __future__ import annotations

from app.web import approvals, channels, conversations, filters, streams  # noqa: F401  (their views, on bp)
from app.web.blueprint import bp
from app.web.streams import LiveText, render_event

__all__ = ["LiveText", "bp", "render_event"]
