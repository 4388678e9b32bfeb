"""The OpenAPI 3.1 description of /api, assembled from its parts."""

from __future__ import annotations

from typing import Any

from app.api.openapi.approvals import approval_paths, countersign_paths
from app.api.openapi.conversations import conversation_paths
from app.api.openapi.schemas import component_schemas
from app.api.openapi.tokens import token_paths


def document() -> dict[str, Any]:
    """The whole description, served at /api/openapi.json."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Countersign API", "version": "1"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": component_schemas(),
        },
        "security": [{"bearer": []}],
        "paths": {**conversation_paths(), **approval_paths(), **countersign_paths(), **token_paths()},
    }
