"""The paths of cards: a person's answers, the lists (theirs, and the tenant's for admins), revoke,
the audit log, and the countersignature's queue and answers."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import (
    APPROVAL_ID,
    PREFER,
    QUEUED,
    array_of,
    errors_of,
    json_body,
    object_of,
    ok,
    operation,
    query,
    ref,
)
from app.status import ANSWERED, REVISED, Decision

ANSWER_DESCRIPTION = (
    "Decided in this request (a confirmed card's handle() runs here); the model's "
    "continuation is waited for like a message's turn, or with `Prefer: respond-async` "
    "the answer is at once: status, result, and the run and events to follow."
)


def _answer(decision: str) -> dict[str, Any]:
    """POST /api/approvals/{id}/<decision>: a person's answer to a card."""
    submit = decision == Decision.SUBMIT
    fields: dict[str, Any] = {"token": {"type": "string"}, **({"values": {"type": "object"}} if submit else {})}
    if decision == Decision.DECLINE:
        fields["reason"] = {"type": "string", "maxLength": 1000, "description": "Why, for the assistant (optional)"}
    return {
        "post": operation(
            f"{decision.capitalize()} a card",
            f"{decision}Approval",
            {"200": ok("The outcome", ref("Answer")), "202": QUEUED, **errors_of(400, 401, 403, 404, 409, 410, 429, 503)},
            description=ANSWER_DESCRIPTION,
            parameters=[APPROVAL_ID, PREFER],
            body=json_body(object_of(fields, ["token", "values"] if submit else ["token"])),
        )
    }


def approval_paths() -> dict[str, Any]:
    """Listing approvals (a person's own, and the tenant's for admins), the audit log, and answering."""
    status = {"name": "status", "in": "query", "schema": {"type": "string", "default": "pending"}}
    return {
        "/api/approvals": {
            "get": operation(
                "Your approvals",
                "listApprovals",
                {"200": ok("Approvals", object_of({"approvals": array_of("Prompt")})), **errors_of(401)},
                parameters=[status],
            )
        },
        "/api/admin/approvals": {
            "get": operation(
                "The tenant's approvals (admins)",
                "adminApprovals",
                {"200": ok("A page of approvals", {"type": "object"}), **errors_of(401, 403)},
                parameters=query("status", "action", "person", "older_than", "after"),
            )
        },
        "/api/admin/approvals/{id}/revoke": {
            "post": operation(
                "Revoke a pending approval (admins)",
                "revokeApproval",
                {"200": ok("Revoked", {"type": "object"}), **errors_of(401, 403, 404, 409)},
                parameters=[APPROVAL_ID],
            )
        },
        "/api/admin/audit": {
            "get": operation(
                "The tenant's audit log and whether its chain verifies (admins)",
                "adminAudit",
                {"200": ok("A page of audit rows", {"type": "object"}), **errors_of(401, 403)},
                parameters=query("event", "outcome", "person", "approval_id", "after"),
            )
        },
        **{f"/api/approvals/{{id}}/{d}": _answer(d) for d in ANSWERED},
        **{f"/api/approvals/{{id}}/{d}": _revise(d) for d in REVISED},
    }


def _revise(decision: str) -> dict[str, Any]:
    """POST /api/approvals/{id}/edit|refresh: a fresh card from an edit, or of a changed card."""
    edit = decision == Decision.EDIT
    fields = {"token": {"type": "string"}, **({"values": {"type": "object"}} if edit else {})}
    fresh = object_of({"status": {"type": "string"}, "replaces": {"type": "string"}, "approval": ref("Prompt")})
    return {
        "post": operation(
            "Edit a pending card: a fresh card to confirm" if edit else "A fresh card for a changed one",
            f"{decision}Approval",
            {"201": ok("The fresh card", fresh), **errors_of(400, 401, 403, 404, 409, 410, 429)},
            parameters=[APPROVAL_ID],
            body=json_body(object_of(fields, ["token", "values"] if edit else ["token"])),
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


def countersign_paths() -> dict[str, Any]:
    """The two-person rule: the queue of cards waiting for this person's countersignature, and
    the second signature (or a decline)."""
    waiting = object_of(
        {
            "id": {"type": "string"},
            "action": {"type": "string"},
            "reason": {"type": "string"},
            "rows": {"type": "array", "items": object_of({"label": {"type": "string"}, "value": {"type": "string"}})},
            "status": {"type": "string"},
            "requested_by": {"type": "string"},
            "confirmed_by": {"type": ["string", "null"]},
            "countersign": {"type": "string", "description": "Who may countersign (the rule's label)"},
            "token": {"type": ["string", "null"], "description": "The countersignature token for this credential"},
            "expires_at": {"type": "string", "format": "date-time"},
        },
        ["id", "action", "reason", "rows", "token", "expires_at"],
    )
    outcome = object_of({"id": {"type": "string"}, "status": {"type": "string"}, "outcome": {"type": "string"}})
    errors = errors_of(400, 401, 403, 404, 409, 410, 429)
    return {
        "/api/countersign": {
            "get": operation(
                "Cards waiting for your countersignature (never your own)",
                "countersignQueue",
                {"200": ok("The queue", object_of({"approvals": {"type": "array", "items": waiting}})), **errors_of(401)},
            )
        },
        "/api/approvals/{id}/countersign": {
            "post": operation(
                "Countersign a card its person confirmed",
                "countersignApproval",
                {"200": ok("The outcome", outcome), **errors},
                description=COUNTERSIGN_DESCRIPTION,
                parameters=[APPROVAL_ID],
                body=json_body(object_of({"token": {"type": "string"}}, ["token"])),
            )
        },
        "/api/approvals/{id}/countersign/decline": {
            "post": operation(
                "Decline a card waiting for your countersignature; nothing runs",
                "declineCountersign",
                {"200": ok("The outcome", outcome), **errors},
                parameters=[APPROVAL_ID],
                body=json_body(object_of({"token": {"type": "string"}, "reason": {"type": "string"}}, ["token"])),
            )
        },
    }
