"""The OpenAPI 3.1 description of /api."""

from __future__ import annotations

from typing import Any

from app.status import ApprovalType, Decision, Role

ANSWERED = (Decision.CONFIRM, Decision.DECLINE, Decision.CANCEL, Decision.SUBMIT)  # answers of their own route


def _ref(name: str) -> dict[str, Any]:
    """A reference to one of components.schemas."""
    return {"$ref": f"#/components/schemas/{name}"}


ERROR = _ref("Error")
ERRORS = {
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
    "content": {"application/json": {"schema": _ref("Queued")}},
}
ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
APPROVAL_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
EVENTS_DESCRIPTION = (
    "Each event has an `id`; reconnect with `Last-Event-ID` (or `?after=`) to resume "
    "with no gap and no repeat. `event: text` — `{run, step, text}`, the model's words as "
    "they are written; `event: turn` — `{run, step, state}` with state `started`, then "
    "one of `done`, `paused`, `failed`, `stopped`, `interrupted` with the pass's "
    "`messages` and the `pending` prompts; `event: approval` — `{id, status}`, a card's "
    "new status, whoever decided it, on any channel; `event: title` — `{title}`, the conversation's "
    "new title (its first message, or a rename). Without a cursor, a turn still running is "
    "replayed from its start. The stream ends after EVENTS_STREAM_SECONDS; reconnect."
)
ANSWER_DESCRIPTION = (
    "Decided in this request (a confirmed card's handle() runs here); the model's "
    "continuation is waited for like a message's turn, or with `Prefer: respond-async` "
    "the answer is at once: status, result, and the run and events to follow."
)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    """The error responses an operation can give, each an Error object."""
    return {str(c): {"description": ERRORS[c], **_json(ERROR)} for c in codes}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON object schema: its required names (if any), then its properties."""
    return {"type": "object", **({"required": required} if required else {}), "properties": properties}


def _array_of(name: str) -> dict[str, Any]:
    return {"type": "array", "items": _ref(name)}


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A success response carrying JSON."""
    return {"description": description, **_json(schema)}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """A required JSON request body."""
    return {"required": True, **_json(schema)}


def _query(*names: str) -> list[dict[str, Any]]:
    """Optional string query parameters (the admin lists' filters)."""
    return [{"name": n, "in": "query", "schema": {"type": "string"}} for n in names]


def _operation(
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


def _revisions() -> dict[str, Any]:
    """A Prompt's second-signature fields (app/copilot/revise.py)."""
    change = _object({k: {"type": "string"} for k in ("label", "before", "after")}, ["label", "before", "after"])
    return {
        "edit": {"type": ["object", "null"], "description": "The Edit form (an elicitation) of a pending card"},
        "replaces": {"type": ["string", "null"], "description": "The card this fresh one replaces"},
        "edited": {"type": ["array", "null"], "items": {"type": "string"}, "description": "Fields the person edited"},
        "changes": {"type": ["array", "null"], "items": change, "description": "A changed card's rows: before, after"},
    }


def _decided() -> dict[str, Any]:
    """A Prompt's who-decided-and-when, and who asked for it (app/copilot/outcomes.py)."""
    maybe = {"type": ["string", "null"]}
    return {
        "outcome": {**maybe, "description": "A decided card's label (its status is `status`)"},
        "decided_by": {**maybe, "description": 'Who decided it and when, e.g. "Declined by you, 2026-12-01 18:52 UTC"'},
        "decided_at": {**maybe, "format": "date-time"},
        "requested_by": {"type": "string", "description": "The person the card asks"},
        "requested_via": {**maybe, "description": "The credential whose call asked for it"},
        "requested_by_agent": {"type": "boolean", "description": "Asked for through an agent credential"},
    }


def _schemas() -> dict[str, Any]:
    """components.schemas: the objects the operations send and answer with."""
    row = _object({"label": {"type": "string"}, "value": {"type": "string"}}, ["label", "value"])
    return {
        "Error": _object({"error": {"type": "string"}, "message": {"type": "string"}}),
        "Message": _object(
            {
                "role": {"type": "string", "enum": [role.value for role in Role]},
                "text": {"type": "string"},
                "approval": {"type": "string"},
            },
            ["role", "text"],
        ),
        "Prompt": _object(
            {
                "id": {"type": "string"},
                "type": {"type": "string", "enum": [kind.value for kind in ApprovalType]},
                "action": {"type": "string"},
                "reason": {"type": "string"},
                "rows": {"type": "array", "items": row},
                "form": {"type": ["object", "null"]},
                "status": {"type": "string"},
                "token": {"type": ["string", "null"]},
                "expires_at": {"type": "string", "format": "date-time"},
                **_decided(),
                **_revisions(),
            },
            ["id", "type", "action", "reason", "rows", "form", "token", "expires_at"],
        ),
        "Turn": _object({"messages": _array_of("Message"), "pending": _array_of("Prompt")}),
        "Queued": _object(
            {
                "run": {"type": "integer"},
                "events": {"type": "string", "description": "The events URL"},
                "status": {"type": "string"},
                "result": {"type": ["string", "null"]},
            },
            ["run", "events"],
        ),
        "Answer": _object(
            {
                "status": {"type": "string"},
                "result": {"type": ["string", "null"]},
                "run": {"type": "integer"},
                "events": {"type": "string"},
                "messages": _array_of("Message"),
                "pending": _array_of("Prompt"),
            }
        ),
    }


def _conversation_paths() -> dict[str, Any]:
    """Starting a conversation, reading it, talking in it and following its events."""
    stopping = _object({"run": {"type": ["integer", "null"]}, "stopping": {"type": "boolean"}})
    return {
        "/api/conversations": {
            "get": _list_conversations(),
            "post": _operation(
                "Start a conversation",
                "createConversation",
                {"201": _ok("Created", _object({"id": {"type": "integer"}})), **_errors(401)},
            ),
        },
        "/api/conversations/{id}": {
            "get": _operation(
                "All messages and pending prompts",
                "getConversation",
                {"200": _ok("The conversation", _ref("Turn")), **_errors(401, 404)},
                parameters=[ID],
            ),
            **_manage_conversation(),
        },
        "/api/conversations/{id}/messages": {
            "post": _operation(
                "Say something to the agent",
                "postMessage",
                {"200": _ok("What the agent added", _ref("Turn")), "202": QUEUED, **_errors(400, 401, 404, 413, 429)},
                parameters=[ID, PREFER],
                body=_body(_object({"text": {"type": "string"}}, ["text"])),
            )
        },
        "/api/conversations/{id}/retry": {
            "post": _operation(
                "Run the last turn again after it failed or was interrupted (a second press runs nothing; "
                "an agent-scoped token only a turn it started: 403)",
                "retryTurn",
                {"200": _ok("What the agent added", _ref("Turn")), "202": QUEUED, **_errors(401, 403, 404, 429)},
                parameters=[ID, PREFER],
            )
        },
        "/api/conversations/{id}/stop": {
            "post": _operation(
                "End the running turn at its next step (its `stopped` end follows on the events; an "
                "agent-scoped token only a turn it started: 403)",
                "stopTurn",
                {"200": _ok("Which run will stop (null: none was running)", stopping), **_errors(401, 403, 404)},
                parameters=[ID],
            )
        },
        "/api/conversations/{id}/events": {"get": _events()},
    }


SUMMARY = _object(
    {"id": {"type": "integer"}, "title": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"}}
)


def _list_conversations() -> dict[str, Any]:
    """GET /api/conversations: the person's own, searched with `q`."""
    summaries = {"type": "array", "items": SUMMARY}
    return _operation(
        "The person's conversations, newest first (100 at most)",
        "listConversations",
        {"200": _ok("Their conversations", _object({"conversations": summaries})), **_errors(401)},
        description="`q` keeps those whose title or messages hold it, case-insensitively and literally "
        "(`%` and `_` are no wildcards). Another person's and deleted conversations are never listed.",
        parameters=_query("q"),
    )


def _manage_conversation() -> dict[str, Any]:
    """PATCH and DELETE /api/conversations/{id}: the person renames or deletes their own."""
    deleted = _object(
        {"id": {"type": "integer"}, "deleted": {"type": "boolean"}, "cancelled": {"type": "array", "items": {"type": "string"}}}
    )
    return {
        "patch": _operation(
            "Rename the conversation",
            "renameConversation",
            {"200": _ok("Renamed", SUMMARY), **_errors(400, 401, 403, 404)},
            description="403 for an agent-scoped token: only the person names their conversations.",
            parameters=[ID],
            body=_body(_object({"title": {"type": "string", "minLength": 1, "maxLength": 200}}, ["title"])),
        ),
        "delete": _operation(
            "Delete the conversation",
            "deleteConversation",
            {
                "200": _ok("Deleted; the cards it ended", deleted),
                **_errors(401, 403, 404),
                "409": {"description": "A turn is still running: stop it, then delete", **_json(ERROR)},
            },
            description="From then on the conversation is 404 on every route. Its cards still waiting end "
            "`cancelled` (audited; nothing runs) and its paused turn is stopped. 403 for an agent-scoped "
            "token: ending a card is answering it, which only the person does.",
            parameters=[ID],
        ),
    }


def _events() -> dict[str, Any]:
    """GET /api/conversations/{id}/events: a Server-Sent Events stream, resumable from a cursor."""
    cursor = [
        {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
        {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
    ]
    stream = {"description": "text/event-stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    return _operation(
        "The conversation's live events (Server-Sent Events)",
        "conversationEvents",
        {"200": stream, **_errors(401, 404)},
        description=EVENTS_DESCRIPTION,
        parameters=[ID, *cursor],
    )


def _answer(decision: str) -> dict[str, Any]:
    """POST /api/approvals/{id}/<decision>: a person's answer to a card."""
    submit = decision == "submit"
    fields: dict[str, Any] = {"token": {"type": "string"}, **({"values": {"type": "object"}} if submit else {})}
    if decision == "decline":
        fields["reason"] = {"type": "string", "maxLength": 1000, "description": "Why, for the assistant (optional)"}
    return {
        "post": _operation(
            f"{decision.capitalize()} a card",
            f"{decision}Approval",
            {"200": _ok("The outcome", _ref("Answer")), "202": QUEUED, **_errors(400, 401, 403, 404, 409, 410, 429, 503)},
            description=ANSWER_DESCRIPTION,
            parameters=[APPROVAL_ID, PREFER],
            body=_body(_object(fields, ["token", "values"] if submit else ["token"])),
        )
    }


def _approval_paths() -> dict[str, Any]:
    """Listing approvals (a person's own, and the tenant's for admins), the audit log, and answering."""
    status = {"name": "status", "in": "query", "schema": {"type": "string", "default": "pending"}}
    return {
        "/api/approvals": {
            "get": _operation(
                "Your approvals",
                "listApprovals",
                {"200": _ok("Approvals", _object({"approvals": _array_of("Prompt")})), **_errors(401)},
                parameters=[status],
            )
        },
        "/api/admin/approvals": {
            "get": _operation(
                "The tenant's approvals (admins)",
                "adminApprovals",
                {"200": _ok("A page of approvals", {"type": "object"}), **_errors(401, 403)},
                parameters=_query("status", "action", "person", "older_than", "after"),
            )
        },
        "/api/admin/approvals/{id}/revoke": {
            "post": _operation(
                "Revoke a pending approval (admins)",
                "revokeApproval",
                {"200": _ok("Revoked", {"type": "object"}), **_errors(401, 403, 404, 409)},
                parameters=[APPROVAL_ID],
            )
        },
        "/api/admin/audit": {
            "get": _operation(
                "The tenant's audit log and whether its chain verifies (admins)",
                "adminAudit",
                {"200": _ok("A page of audit rows", {"type": "object"}), **_errors(401, 403)},
                parameters=_query("event", "outcome", "person", "approval_id", "after"),
            )
        },
        **{
            f"/api/approvals/{{id}}/{d}": _answer(d)
            for d in (Decision.CONFIRM, Decision.DECLINE, Decision.CANCEL, Decision.SUBMIT)
        },
        **{f"/api/approvals/{{id}}/{d}": _revise(d) for d in (Decision.EDIT, Decision.REFRESH)},
    }


def _revise(decision: str) -> dict[str, Any]:
    """POST /api/approvals/{id}/edit|refresh: a fresh card from an edit, or of a changed card."""
    edit = decision == "edit"
    fields = {"token": {"type": "string"}, **({"values": {"type": "object"}} if edit else {})}
    fresh = _object({"status": {"type": "string"}, "replaces": {"type": "string"}, "approval": _ref("Prompt")})
    return {
        "post": _operation(
            "Edit a pending card: a fresh card to confirm" if edit else "A fresh card for a changed one",
            f"{decision}Approval",
            {"201": _ok("The fresh card", fresh), **_errors(400, 401, 403, 404, 409, 410, 429)},
            parameters=[APPROVAL_ID],
            body=_body(_object(fields, ["token", "values"] if edit else ["token"])),
        )
    }


COUNTERSIGN_DESCRIPTION = (
    "The second signature of the two-person rule (an action's `countersign`). After the person "
    "confirms, the card is `countersigning`; a different person of the tenant whom the rule "
    "allows countersigns with the countersignature `token` that GET /api/countersign gave their "
    "own credential (their browser session with its CSRF header, or their client-scope token; "
    "an agent-scoped token gets none and is refused). The person who asked never can. "
    "handle() runs here, once, as the person who asked; the answer is the card's outcome, never "
    "what handle() said, which stays in the person's conversation."
)


def _countersign_paths() -> dict[str, Any]:
    """The two-person rule: the queue of cards waiting for this person's countersignature, and
    the second signature (or a decline)."""
    waiting = _object(
        {
            "id": {"type": "string"},
            "action": {"type": "string"},
            "reason": {"type": "string"},
            "rows": {"type": "array", "items": _object({"label": {"type": "string"}, "value": {"type": "string"}})},
            "status": {"type": "string"},
            "requested_by": {"type": "string"},
            "confirmed_by": {"type": ["string", "null"]},
            "countersign": {"type": "string", "description": "Who may countersign (the rule's label)"},
            "token": {"type": ["string", "null"], "description": "The countersignature token for this credential"},
            "expires_at": {"type": "string", "format": "date-time"},
        },
        ["id", "action", "reason", "rows", "token", "expires_at"],
    )
    outcome = _object({"id": {"type": "string"}, "status": {"type": "string"}, "outcome": {"type": "string"}})
    errors = _errors(400, 401, 403, 404, 409, 410, 429)
    return {
        "/api/countersign": {
            "get": _operation(
                "Cards waiting for your countersignature (never your own)",
                "countersignQueue",
                {"200": _ok("The queue", _object({"approvals": {"type": "array", "items": waiting}})), **_errors(401)},
            )
        },
        "/api/approvals/{id}/countersign": {
            "post": _operation(
                "Countersign a card its person confirmed",
                "countersignApproval",
                {"200": _ok("The outcome", outcome), **errors},
                description=COUNTERSIGN_DESCRIPTION,
                parameters=[APPROVAL_ID],
                body=_body(_object({"token": {"type": "string"}}, ["token"])),
            )
        },
        "/api/approvals/{id}/countersign/decline": {
            "post": _operation(
                "Decline a card waiting for your countersignature; nothing runs",
                "declineCountersign",
                {"200": _ok("The outcome", outcome), **errors},
                parameters=[APPROVAL_ID],
                body=_body(_object({"token": {"type": "string"}, "reason": {"type": "string"}}, ["token"])),
            )
        },
    }


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
