"""The pieces the description is built from: a reference, an object, an operation and its error
responses, and the parameters and responses many operations share."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, Any]:
    """A reference to one of components.schemas."""
    return {"$ref": f"#/components/schemas/{name}"}


ERROR = ref("Error")
ERRORS = {
    400: "Bad token or values",
    401: "Not signed in",
    403: "Another person or session, an agent-scoped token (it never answers), or outside the token's toolsets",
    404: "Not found in your tenant",
    409: "Already decided",
    410: "Expired",
    413: "Message over MESSAGE_MAX_CHARS (refused whole, never cut)",
    429: "Too many requests; Retry-After says when to try again",
    503: "Briefly unavailable; nothing changed; Retry-After says when to try again",
}
PREFER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "RFC 7240. By default the request waits for the turn (at most TURN_WAIT seconds, "
    "`wait=N` asks less); `respond-async` answers at once and the turn follows on the events.",
}
QUEUED = {
    "description": "The turn is still going (or `respond-async`): follow it on `events`",
    "headers": {"Preference-Applied": {"schema": {"type": "string"}}},
    "content": {"application/json": {"schema": ref("Queued")}},
}
ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
APPROVAL_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def errors_of(*codes: int) -> dict[str, Any]:
    """The error responses an operation can give, each an Error object."""
    return {str(c): {"description": ERRORS[c], **json_content(ERROR)} for c in codes}


def object_of(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON object schema: its required names (if any), then its properties."""
    return {"type": "object", **({"required": required} if required else {}), "properties": properties}


def array_of(name: str) -> dict[str, Any]:
    return {"type": "array", "items": ref(name)}


def ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A success response carrying JSON."""
    return {"description": description, **json_content(schema)}


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    """A required JSON request body."""
    return {"required": True, **json_content(schema)}


def query(*names: str) -> list[dict[str, Any]]:
    """Optional string query parameters (the admin lists' filters)."""
    return [{"name": n, "in": "query", "schema": {"type": "string"}} for n in names]


def operation(
    summary: str,
    operation_id: str,
    responses: dict[str, Any],
    *,
    description: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One operation, its keys in the order the document has always had them."""
    return {
        "summary": summary,
        **({"description": description} if description else {}),
        "operationId": operation_id,
        **({"parameters": parameters} if parameters else {}),
        **({"requestBody": body} if body else {}),
        "responses": responses,
    }
