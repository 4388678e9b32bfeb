"""The paths of cards: a person's answers, the lists (theirs, and the tenant's for admins), revoke,
the audit log, and the countersignature's queue and answers."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import APPROVAL_ID, PREFER, QUEUED, _array_of, _body, _errors, _object, _ok, _operation, _query, _ref

ANSWER_DESCRIPTION = (
    "Decided in this request (a confirmed card's handle() runs here); the model's "
    "continuation is waited for like a message's turn, or with `Prefer: respond-async` "
    "the answer is at once: status, result, and the run and events to follow."
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
        **{f"/api/approvals/{{id}}/{d}": _answer(d) for d in ("confirm", "decline", "cancel", "submit")},
        **{f"/api/approvals/{{id}}/{d}": _revise(d) for d in ("edit", "refresh")},
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
