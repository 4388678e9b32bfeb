"""JSON as the API and the webhooks read it: strict where Python's json module is lenient (NaN,
Infinity, 1e999999) or fails with a RecursionError (deep nesting), so a bad body is a clear 400,
never a 500, and never a value no database here can store."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from flask import Flask, current_app, request
from flask.json.provider import DefaultJSONProvider

from app.errors import BadJson

MAX_DEPTH = 64  # far deeper than any body the API or a chat service sends


class StrictJSONProvider(DefaultJSONProvider):
    """Flask's JSON, reading only what RFC 8259 allows, no deeper than MAX_DEPTH; every refusal
    is a ValueError, so `request.get_json(silent=True)` stays silent."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        try:
            value = json.loads(s, parse_constant=_no_constant, parse_float=_finite, parse_int=_integer, **kwargs)
        except RecursionError:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
        if _depth(value) > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
        return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {_shown(text)} is out of range")
    return value


def _integer(text: str) -> int:
    if len(text) > sys.get_int_max_str_digits():  # Python's own limit, said plainly
        raise ValueError(f"the number {_shown(text)} is out of range")
    return int(text)


def _shown(text: str) -> str:
    return text if len(text) <= 20 else text[:20] + "…"


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest (walked with a stack; stops once past the limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_object() -> dict[str, Any]:
    """The request's JSON object, or a BadJson naming what is wrong with the body."""
    if not request.is_json:
        raise BadJson("Send a JSON object with Content-Type: application/json.")
    data = request.get_json(silent=True)  # parsed once: the door (app.no_nul) has cached it
    if data is None:
        try:
            current_app.json.loads(request.get_data())
        except ValueError as error:
            raise BadJson(f"The body is not valid JSON: {error}.") from None
    if not isinstance(data, dict):
        raise BadJson("Send a JSON object.")
    return data


def init_app(app: Flask) -> None:
    app.json = StrictJSONProvider(app)
