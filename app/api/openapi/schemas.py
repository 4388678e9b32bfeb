"""components.schemas: the objects the operations send and answer with (a Message, a Prompt, a Turn…)."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import array_of, object_of
from app.status import ApprovalType, Role


def _revisions() -> dict[str, Any]:
    """A Prompt's second-signature fields (app/copilot/revise.py)."""
    change = object_of({k: {"type": "string"} for k in ("label", "before", "after")}, ["label", "before", "after"])
    return {
        "edit": {
            "type": ["object", "null"],
            "description": "The Edit form (an elicitation) of a pending card, with its token only",
        },
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


def component_schemas() -> dict[str, Any]:
    """components.schemas: the objects the operations send and answer with."""
    row = object_of({"label": {"type": "string"}, "value": {"type": "string"}}, ["label", "value"])
    return {
        "Error": object_of({"error": {"type": "string"}, "message": {"type": "string"}}),
        "Message": object_of(
            {
                "role": {"type": "string", "enum": [role.value for role in Role]},
                "text": {"type": "string"},
                "approval": {"type": "string"},
            },
            ["role", "text"],
        ),
        "Prompt": object_of(
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
        "Turn": object_of({"messages": array_of("Message"), "pending": array_of("Prompt")}),
        "Queued": object_of(
            {
                "run": {"type": "integer"},
                "events": {"type": "string", "description": "The events URL"},
                "status": {"type": "string"},
                "result": {"type": ["string", "null"]},
            },
            ["run", "events"],
        ),
        "Answer": object_of(
            {
                "status": {"type": "string"},
                "result": {"type": ["string", "null"]},
                "run": {"type": "integer"},
                "events": {"type": "string"},
                "messages": array_of("Message"),
                "pending": array_of("Prompt"),
            }
        ),
    }
