"""U+0000 cannot be stored in PostgreSQL text: refuse it at the door, the same on every database,
rather than fail deep inside a request (the connectors drop it from what chat services send)."""

from __future__ import annotations

import re

from flask import Flask, request

from app.errors import BadValues

REFUSED = "Text may not contain the NUL character (U+0000)."
JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")  # the escape \u0000, not an escaped backslash before "u0000"


def init_app(app: Flask) -> None:
    @app.before_request
    def refuse_nul_characters() -> None:
        """A 400 for NUL in the path, the query, a form or a JSON body."""
        if request.blueprint == "connectors":
            return
        texts = [request.path, *(t for pair in request.args.items(multi=True) for t in pair)]
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            texts += [t for pair in request.form.items(multi=True) for t in pair]
            if request.is_json and JSON_NUL.search(request.get_data()):
                raise BadValues(REFUSED)
        if any("\x00" in t for t in texts):
            raise BadValues(REFUSED)
