"""The OpenAPI 3.1 description of /api."""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "Bad token or values",
        401: "Not signed in",
        403: "Another person or session, an agent-scoped token (it never answers), or outside the token's toolsets",
        404: "Not found in your tenant",
        409: "Already decided",
        410: "Expired",
        413: "Message over MESSAGE_MAX_CHARS (refused whole, never cut)",
        429: "Too many requests; Retry-After says when to try again",
        503: "Briefly unavailable; nothing changed",
    }
    return {str(c): {"description": text[c], **_json(ERROR)} for c in codes}


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
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Queued"}}},
}
ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}


def _answer(decision: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": f"{decision.capitalize()} a card",
            "description": "Decided in this request (a confirmed card's handle() runs here); the model's "
            "continuation is waited for like a message's turn, or with `Prefer: respond-async` "
            "the answer is at once: status, result, and the run and events to follow.",
            "operationId": f"{decision}Approval",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}, PREFER],
            "requestBody": {
                "required": True,
                **_json(
                    {
                        "type": "object",
                        "required": ["token", "values"] if decision == "submit" else ["token"],
                        "properties": {
                            "token": {"type": "string"},
                            **({"values": {"type": "object"}} if decision == "submit" else {}),
                        },
                    }
                ),
            },
            "responses": {
                "200": {"description": "The outcome", **_json({"$ref": "#/components/schemas/Answer"})},
                "202": QUEUED,
                **_errors(400, 401, 403, 404, 409, 410, 429, 503),
            },
        }
    }


def document() -> dict[str, Any]:
    message = {
        "type": "object",
        "required": ["role", "text"],
        "properties": {
            "role": {"type": "string", "enum": ["user", "assistant", "notice", "error", "card"]},
            "text": {"type": "string"},
            "approval": {"type": "string"},
        },
    }
    prompt = {
        "type": "object",
        "required": ["id", "type", "action", "reason", "rows", "form", "token", "expires_at"],
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string", "enum": ["confirm", "form"]},
            "action": {"type": "string"},
            "reason": {"type": "string"},
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["label", "value"],
                    "properties": {"label": {"type": "string"}, "value": {"type": "string"}},
                },
            },
            "form": {"type": ["object", "null"]},
            "status": {"type": "string"},
            "token": {"type": ["string", "null"]},
            "expires_at": {"type": "string", "format": "date-time"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Countersign API", "version": "1"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "string"}, "message": {"type": "string"}}},
                "Message": message,
                "Prompt": prompt,
                "Turn": {
                    "type": "object",
                    "properties": {
                        "messages": {"type": "array", "items": {"$ref": "#/components/schemas/Message"}},
                        "pending": {"type": "array", "items": {"$ref": "#/components/schemas/Prompt"}},
                    },
                },
                "Queued": {
                    "type": "object",
                    "required": ["run", "events"],
                    "properties": {
                        "run": {"type": "integer"},
                        "events": {"type": "string", "description": "The events URL"},
                        "status": {"type": "string"},
                        "result": {"type": ["string", "null"]},
                    },
                },
                "Answer": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string"},
                        "result": {"type": ["string", "null"]},
                        "run": {"type": "integer"},
                        "events": {"type": "string"},
                        "messages": {"type": "array", "items": {"$ref": "#/components/schemas/Message"}},
                        "pending": {"type": "array", "items": {"$ref": "#/components/schemas/Prompt"}},
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/conversations": {
                "post": {
                    "summary": "Start a conversation",
                    "operationId": "createConversation",
                    "responses": {
                        "201": {"description": "Created", **_json({"type": "object", "properties": {"id": {"type": "integer"}}})},
                        **_errors(401),
                    },
                }
            },
            "/api/conversations/{id}": {
                "get": {
                    "summary": "All messages and pending prompts",
                    "operationId": "getConversation",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                    "responses": {
                        "200": {"description": "The conversation", **_json({"$ref": "#/components/schemas/Turn"})},
                        **_errors(401, 404),
                    },
                }
            },
            "/api/conversations/{id}/messages": {
                "post": {
                    "summary": "Say something to the agent",
                    "operationId": "postMessage",
                    "parameters": [ID, PREFER],
                    "requestBody": {
                        "required": True,
                        **_json({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
                    },
                    "responses": {
                        "200": {"description": "What the agent added", **_json({"$ref": "#/components/schemas/Turn"})},
                        "202": QUEUED,
                        **_errors(400, 401, 404, 413, 429),
                    },
                }
            },
            "/api/conversations/{id}/retry": {
                "post": {
                    "summary": "Run the last turn again after it failed or was interrupted (a second press runs nothing)",
                    "operationId": "retryTurn",
                    "parameters": [ID, PREFER],
                    "responses": {
                        "200": {"description": "What the agent added", **_json({"$ref": "#/components/schemas/Turn"})},
                        "202": QUEUED,
                        **_errors(401, 404, 429),
                    },
                }
            },
            "/api/conversations/{id}/stop": {
                "post": {
                    "summary": "End the running turn at its next step (its `stopped` end follows on the events)",
                    "operationId": "stopTurn",
                    "parameters": [ID],
                    "responses": {
                        "200": {
                            "description": "Which run will stop (null: none was running)",
                            **_json(
                                {
                                    "type": "object",
                                    "properties": {"run": {"type": ["integer", "null"]}, "stopping": {"type": "boolean"}},
                                }
                            ),
                        },
                        **_errors(401, 404),
                    },
                }
            },
            "/api/conversations/{id}/events": {
                "get": {
                    "summary": "The conversation's live events (Server-Sent Events)",
                    "description": "Each event has an `id`; reconnect with `Last-Event-ID` (or `?after=`) to resume "
                    "with no gap and no repeat. `event: text` — `{run, step, text}`, the model's words as "
                    "they are written; `event: turn` — `{run, step, state}` with state `started`, then "
                    "one of `done`, `paused`, `failed`, `stopped`, `interrupted` with the pass's "
                    "`messages` and the `pending` prompts. Without a cursor, a turn still running is "
                    "replayed from its start. The stream ends after EVENTS_STREAM_SECONDS; reconnect.",
                    "operationId": "conversationEvents",
                    "parameters": [
                        ID,
                        {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
                        {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": {
                            "description": "text/event-stream",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        **_errors(401, 404),
                    },
                }
            },
            "/api/approvals": {
                "get": {
                    "summary": "Your approvals",
                    "operationId": "listApprovals",
                    "parameters": [{"name": "status", "in": "query", "schema": {"type": "string", "default": "pending"}}],
                    "responses": {
                        "200": {
                            "description": "Approvals",
                            **_json(
                                {
                                    "type": "object",
                                    "properties": {
                                        "approvals": {"type": "array", "items": {"$ref": "#/components/schemas/Prompt"}}
                                    },
                                }
                            ),
                        },
                        **_errors(401),
                    },
                }
            },
            "/api/admin/approvals": {
                "get": {
                    "summary": "The tenant's approvals (admins)",
                    "operationId": "adminApprovals",
                    "parameters": [
                        {"name": n, "in": "query", "schema": {"type": "string"}}
                        for n in ("status", "action", "person", "older_than", "after")
                    ],
                    "responses": {
                        "200": {"description": "A page of approvals", **_json({"type": "object"})},
                        **_errors(401, 403),
                    },
                }
            },
            "/api/admin/approvals/{id}/revoke": {
                "post": {
                    "summary": "Revoke a pending approval (admins)",
                    "operationId": "revokeApproval",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "Revoked", **_json({"type": "object"})}, **_errors(401, 403, 404, 409)},
                }
            },
            "/api/admin/audit": {
                "get": {
                    "summary": "The tenant's audit log and whether its chain verifies (admins)",
                    "operationId": "adminAudit",
                    "parameters": [
                        {"name": n, "in": "query", "schema": {"type": "string"}}
                        for n in ("event", "outcome", "person", "approval_id", "after")
                    ],
                    "responses": {
                        "200": {"description": "A page of audit rows", **_json({"type": "object"})},
                        **_errors(401, 403),
                    },
                }
            },
            "/api/approvals/{id}/confirm": _answer("confirm"),
            "/api/approvals/{id}/decline": _answer("decline"),
            "/api/approvals/{id}/cancel": _answer("cancel"),
            "/api/approvals/{id}/submit": _answer("submit"),
        },
    }
