"""The browser's blueprint, `web`: each module of app/web adds its views to it."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("web", __name__)
