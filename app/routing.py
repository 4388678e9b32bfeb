"""URL converters shared by the blueprints, and the one check for where a redirect may go."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from flask import request
from werkzeug.routing import IntegerConverter, Map

from app.models import ROW_ID_MAX

# Browsers drop tabs and newlines anywhere in a URL, trim spaces and control characters at its ends,
# and read "\" as "/": "/\t/evil", " //evil" and "/\evil" all lead off-site, so none is followed.
_BROWSER_REWRITES = re.compile(r"[\x00-\x20\x7f\\]")


class RowIdConverter(IntegerConverter):
    """A row id in a URL: a positive integer that fits an INTEGER column; anything else is a 404
    before a query is built (a larger number would overflow the database driver)."""

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        super().__init__(map, min=1, max=ROW_ID_MAX)


def safe_target(target: str | None, within: str = "/") -> str | None:
    """`target` if a browser would follow it to a path on this site under `within`, else None.
    A full URL counts only when it names this very origin (as a Referer does); it becomes its path."""
    if not target or _BROWSER_REWRITES.search(target):
        return None
    try:
        parts = urlsplit(target)
    except ValueError:  # "http://[" and other hosts no browser would go to
        return None
    if parts.scheme or parts.netloc:
        if (parts.scheme, parts.netloc) != (request.scheme, request.host):
            return None
        target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    if within != "/" and parts.path != within and not parts.path.startswith(within.rstrip("/") + "/"):
        return None
    return target
