"""The admin part of the JSON API: the tenant's approvals, revoke, the audit log."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, jsonify, request

from app.api import authenticate
from app.auth import current_actor
from app.copilot import agent, audit_check, review
from app.extensions import csrf
from app.models import Approval, AuditEvent

bp = Blueprint("api_admin", __name__)
csrf.exempt(bp)


@bp.before_request
def admins_only() -> None:
    authenticate()
    if not current_actor("api").user.is_admin:
        abort(403)


def approval_json(a: Approval) -> dict[str, Any]:
    """What an admin may see of an approval: the card, never the arguments or a token."""
    return {
        "id": a.id,
        "person": a.user.email,
        "action": a.action,
        "type": a.type,
        "reason": a.reason,
        "rows": a.rows,
        "status": a.status,
        "created_at": a.created_at.isoformat(),
        "expires_at": a.expires_at.isoformat(),
        "decided_at": a.decided_at.isoformat() if a.decided_at else None,
        "conversation": a.conversation_id,
    }


def audit_json(e: AuditEvent) -> dict[str, Any]:
    """One audit row as the API shows it (rows hold no value or secret)."""
    return {
        "seq": e.seq,
        "at": e.created_at.isoformat(),
        "user_id": e.user_id,
        "event": e.event,
        "outcome": e.outcome,
        "approval": e.approval_id,
        "detail": e.detail,
        "channel": e.channel,
        "hash": e.hash,
    }


@bp.get("/approvals")
def approvals() -> Any:
    actor = current_actor("api")
    page = review.approvals(actor.user.tenant_id, review.filters_from(request.args), request.args.get("after"))
    return jsonify(approvals=[approval_json(a) for a in page.rows], next=page.next_cursor)


@bp.post("/approvals/<approval_id>/revoke")
def revoke(approval_id: str) -> Any:
    actor = current_actor("api")
    approval = agent.revoke(approval_id, actor.user, by_agent=actor.agent)
    return jsonify(approval_json(approval))


@bp.get("/audit")
def audit_log() -> Any:
    """The tenant's audit log, filtered, a page at a time, with whether its chain verifies since its last mark."""
    actor = current_actor("api")
    verdict = audit_check.verify_since_mark(actor.user.tenant_id)  # first: it commits its mark, which expires loaded rows
    page = review.audit_rows(actor.user.tenant_id, review.audit_filters_from(request.args), cursor=request.args.get("after"))
    return jsonify(
        events=[audit_json(e) for e in page.rows],
        next=page.next_cursor,
        chain={"ok": verdict.ok, "rows": verdict.rows, "broken_id": verdict.broken_id, "reason": verdict.reason},
    )
