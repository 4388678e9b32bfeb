"""components.schemas: the objects the operations send and answer with (a Message, a Prompt, a Turn…)."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import _array_of, _object


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
                "role": {"type": "string", "enum": ["user", "assistant", "notice", "error", "card"]},
                "text": {"type": "string"},
                "approval": {"type": "string"},
            },
            ["role", "text"],
        ),
        "Prompt": _object(
            {
                "id": {"type": "string"},
                "type": {"type": "string", "enum": ["confirm", "form"]},
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
