"""The OpenAPI 3.1 description of /api, assembled from its parts."""

from __future__ import annotations

from typing import Any

from app.api.openapi.approvals import _approval_paths, _countersign_paths
from app.api.openapi.conversations import _conversation_paths
from app.api.openapi.schemas import _schemas
from app.api.openapi.tokens import _token_paths


def document() -> dict[str, Any]:
    """The whole description, served at /api/openapi.json."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Countersign API", "version": "1"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": _schemas(),
        },
        "security": [{"bearer": []}],
        "paths": {**_conversation_paths(), **_approval_paths(), **_countersign_paths(), **_token_paths()},
    }
