"""The paths of the tenant's personal access tokens (admins)."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import ID, errors_of, json_body, object_of, ok, operation


def token_paths() -> dict[str, Any]:
    """The tenant's personal access tokens, for an admin's session or `client` token (never an agent's)."""
    token = object_of(
        {
            "id": {"type": "integer"},
            "person": {"type": "string"},
            "name": {"type": "string"},
            "scope": {"type": "string", "enum": ["agent", "client"]},
            "toolsets": {"type": "array", "items": {"type": "string"}},
            "created_at": {"type": "string"},
            "revoked": {"type": "boolean"},
        }
    )
    new = object_of(
        {
            "person": {"type": "string", "description": "The email of a person of your tenant"},
            "name": {"type": "string"},
            "scope": {"type": "string", "enum": ["agent", "client"], "default": "agent"},
            "toolsets": {"type": "array", "items": {"type": "string"}},
        },
        ["person"],
    )
    made = {**token, "properties": {**token["properties"], "token": {"type": "string", "description": "Shown this once"}}}
    return {
        "/api/admin/tokens": {
            "get": operation(
                "The tenant's tokens (admins)",
                "adminTokens",
                {
                    "200": ok("Tokens, newest first", object_of({"tokens": {"type": "array", "items": token}})),
                    **errors_of(401, 403),
                },
            ),
            "post": operation(
                "Make a token for a person of the tenant (admins; audited)",
                "adminCreateToken",
                {"201": ok("The token, shown this once", made), **errors_of(400, 401, 403, 404)},
                body=json_body(new),
            ),
        },
        "/api/admin/tokens/{id}/revoke": {
            "post": operation(
                "Revoke a token of the tenant with a reason (admins; audited)",
                "adminRevokeToken",
                {"200": ok("Revoked", token), **errors_of(400, 401, 403, 404, 409)},
                parameters=[ID],
                body=json_body(object_of({"reason": {"type": "string"}}, ["reason"])),
            )
        },
    }
