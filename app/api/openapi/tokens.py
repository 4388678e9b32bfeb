"""The paths of the tenant's personal access tokens (admins)."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import ID, _body, _errors, _object, _ok, _operation


def _token_paths() -> dict[str, Any]:
    """The tenant's personal access tokens, for an admin's session or `client` token (never an agent's)."""
    token = _object(
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
    new = _object(
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
            "get": _operation(
                "The tenant's tokens (admins)",
                "adminTokens",
                {"200": _ok("Tokens, newest first", _object({"tokens": {"type": "array", "items": token}})), **_errors(401, 403)},
            ),
            "post": _operation(
                "Make a token for a person of the tenant (admins; audited)",
                "adminCreateToken",
                {"201": _ok("The token, shown this once", made), **_errors(400, 401, 403, 404)},
                body=_body(new),
            ),
        },
        "/api/admin/tokens/{id}/revoke": {
            "post": _operation(
                "Revoke a token of the tenant with a reason (admins; audited)",
                "adminRevokeToken",
                {"200": _ok("Revoked", token), **_errors(400, 401, 403, 404, 409)},
                parameters=[ID],
                body=_body(_object({"reason": {"type": "string"}}, ["reason"])),
            )
        },
    }
