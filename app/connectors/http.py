"""A small JSON POST over HTTP for the connectors' outbound calls (stdlib, short timeout)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def post_json(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """POST a JSON body to a platform's API and return its JSON answer (urllib raises on an HTTP error)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json; charset=utf-8", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (configured URLs only)
        return json.loads(response.read() or b"{}")
