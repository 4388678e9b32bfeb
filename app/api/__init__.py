"""The JSON API of DESIGN §5: conversations, messages and card answers.

Only the wiring: each view module adds its views to the blueprint `bp` as it is imported."""

from __future__ import annotations

from app.api import approvals, conversations, events  # noqa: F401  (their views, on bp)
from app.api.blueprint import authenticate, body, bp
from app.api.shapes import prompt

__all__ = ["authenticate", "body", "bp", "prompt"]
