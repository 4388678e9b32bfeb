"""The admin part of the JSON API: the tenant's approvals, revoke, the audit log, and its tokens."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, jsonify, request

from app import copilot
from app.api import authenticate, body
from app.auth import current_actor, hash_token, issue_token, revoke_with_reason, tenant_token, tenant_tokens, token_toolsets
from app.copilot import audit, review
from app.copilot.approvals import Actor
from app.errors import AlreadyDecided, BadValues
from app.extensions import csrf, db
from app.models import ApiToken, Approval, AuditEvent, User

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
    approval = copilot.revoke(approval_id, actor.user, by_agent=actor.agent)
    return jsonify(approval_json(approval))


@bp.get("/audit")
def audit_log() -> Any:
    """The tenant's audit log, filtered, a page at a time, with whether its chain verifies since its last mark."""
    actor = current_actor("api")
    verdict = audit.verify_since_mark(actor.user.tenant_id)  # first: it commits its mark, which expires loaded rows
    page = review.audit_rows(actor.user.tenant_id, review.audit_filters_from(request.args), cursor=request.args.get("after"))
    return jsonify(
        events=[audit_json(e) for e in page.rows],
        next=page.next_cursor,
        chain={"ok": verdict.ok, "rows": verdict.rows, "broken_id": verdict.broken_id, "reason": verdict.reason},
    )


def token_json(t: ApiToken) -> dict[str, Any]:
    """A token as an admin may see it: never the token itself (only its hash is kept)."""
    return {
        "id": t.id,
        "person": t.user.email,
        "name": t.name,
        "scope": t.scope,
        "toolsets": token_toolsets(t) or [],
        "created_at": t.created_at.isoformat(),
        "revoked": t.revoked,
    }


def _person_credential() -> Actor:
    """An admin's browser session or `client` token: an agent never makes or revokes tokens (403)."""
    actor = current_actor("api")
    if actor.agent:
        abort(403)
    return actor


@bp.get("/tokens")
def tokens() -> Any:
    """The tenant's tokens, newest first."""
    return jsonify(tokens=[token_json(t) for t in tenant_tokens(_person_credential().user.tenant_id)])


@bp.post("/tokens")
def create_token() -> Any:
    """A token for a person of the tenant, by email: 201 with the token, shown this once."""
    actor, sent = _person_credential(), body()
    fields = (sent.get("person"), sent.get("name", ""), sent.get("scope", "agent"))
    toolsets = sent.get("toolsets", [])
    strings = all(isinstance(f, str) for f in fields) and isinstance(toolsets, list)
    if not strings or not all(isinstance(t, str) for t in toolsets):
        raise BadValues("Send person (an email), and name, scope and toolsets (a list of names) if you like.")
    email, name, scope = (str(f) for f in fields)
    person = db.session.scalar(sa.select(User).where(User.email == email.strip().lower()))
    secret = issue_token(actor.user, person, name, scope, toolsets, "api")
    made = db.session.scalar(sa.select(ApiToken).where(ApiToken.token_hash == hash_token(secret)))
    assert made is not None
    return jsonify({**token_json(made), "token": secret}), 201, {"Cache-Control": "no-store"}


@bp.post("/tokens/<id:token_id>/revoke")
def revoke_token(token_id: int) -> Any:
    """Revoke a token of the tenant with a reason (audited); 409 if it already was."""
    actor = _person_credential()
    token = tenant_token(actor.user, token_id)
    reason = body().get("reason", "")
    if not revoke_with_reason(token, actor.user, reason if isinstance(reason, str) else "", "api"):
        raise AlreadyDecided("This token was already revoked.")
    return jsonify(token_json(token))
