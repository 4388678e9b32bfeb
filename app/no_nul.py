"""Text no database here can store — U+0000 (PostgreSQL text refuses it) and lone surrogates (no
UTF-8 encoder takes them) — is refused at the door, the same on every database, rather than fail
deep inside a request and lose what was sent (the connectors scrub what chat services send)."""

from __future__ import annotations

from flask import Flask, request

from app.copilot.text import text_problem, value_problem
from app.errors import UnstorableText


def init_app(app: Flask) -> None:
    @app.before_request
    def refuse_unstorable_text() -> None:
        """A 400 naming the character, for NUL in the path, the query or a form, and for NUL or a
        lone surrogate anywhere in a JSON body (forms and queries decode bad bytes to U+FFFD)."""
        if request.blueprint == "connectors":
            return
        texts = [request.path, *(t for pair in request.args.items(multi=True) for t in pair)]
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            texts += [t for pair in request.form.items(multi=True) for t in pair]
            problem = value_problem(request.get_json(silent=True)) if request.is_json else None
            if problem:
                raise UnstorableText(problem)
        for text in texts:
            problem = text_problem(text)
            if problem:
                raise UnstorableText(problem)
