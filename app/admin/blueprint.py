"""The admin console's blueprint, made here so that the modules whose pages join it (the package's
__init__, tokens.py) do not import each other for it."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("admin", __name__)
