"""The admin console's tokens page: every personal access token of the admin's tenant, with its
scope and toolsets; a new token for a person of the tenant (its secret shown once), and Revoke
with a reason (both audited). Registered on the admin blueprint (admins only)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import flash, make_response, redirect, render_template, request, url_for

from app.admin import bp
from app.auth import SCOPES, create_token, current_actor, known_toolsets, revoke_token
from app.copilot import review
from app.errors import NotFound
from app.extensions import db
from app.models import ROW_ID_MAX, ApiToken, User

PAGE = 500
REASON_MAX = 500


@bp.get("/tokens")
def tokens() -> Any:
    """The tenant's tokens, newest first (never the tokens themselves: only their hashes are
    kept), and the form that makes one."""
    return tokens_page()


def tokens_page(error: str | None = None, status: int = 200) -> Any:
    """The tokens page, with an error above the form when a new token was refused."""
    tenant_id = current_actor("admin").user.tenant_id
    rows = db.session.execute(
        sa.select(ApiToken, User.email)
        .join(User, ApiToken.user_id == User.id)
        .where(User.tenant_id == tenant_id)
        .order_by(ApiToken.id.desc())
        .limit(PAGE)
    ).all()
    people = sorted(review.people(tenant_id).items(), key=lambda item: item[1])
    page = render_template(
        "admin/tokens.html", rows=rows, people=people, scopes=SCOPES, toolsets=known_toolsets(), error=error, form=request.form
    )
    return page, status


@bp.post("/tokens")
def create_api_token() -> Any:
    """Make a token for a person of this tenant and show its secret once, in this answer only
    (never stored, never cached). A person of another tenant looks like no one (404)."""
    actor = current_actor("admin")
    person = _tenant_person(request.form.get("person", ""), actor.user.tenant_id)
    scope = request.form.get("scope", "agent")
    wanted = request.form.getlist("toolsets")
    unknown = [t for t in wanted if t not in known_toolsets()]
    if scope not in SCOPES or unknown:
        return tokens_page(f"Unknown toolset {', '.join(unknown)}." if unknown else "Choose a scope: agent or client.", 400)
    name = request.form.get("name", "").strip()[:200]
    secret = create_token(person, name, ",".join(wanted), scope=scope, by=actor.user, channel="admin")
    page = render_template(
        "admin/token_created.html", secret=secret, email=person.email, name=name, scope=scope, toolsets=",".join(wanted)
    )
    response = make_response(page, 201)
    response.headers["Cache-Control"] = "no-store"
    return response


def _tenant_person(raw: str, tenant_id: int) -> User:
    """The person a form names by id, if they belong to this tenant; otherwise 404."""
    user = db.session.get(User, int(raw)) if raw.isdigit() and 0 < int(raw) <= ROW_ID_MAX else None
    if user is None or user.tenant_id != tenant_id:
        raise NotFound()
    return user


def _tenant_token(token_id: int) -> ApiToken:
    """A token of this tenant; another tenant's token looks like no token at all (404)."""
    token = db.session.get(ApiToken, token_id)
    if token is None or token.user.tenant_id != current_actor("admin").user.tenant_id:
        raise NotFound()
    return token


@bp.get("/tokens/<id:token_id>/revoke")
def confirm_revoke(token_id: int) -> Any:
    """Ask before revoking: the token, whose it is, and a reason to give (nothing changes here)."""
    return render_template("admin/token_revoke.html", token=_tenant_token(token_id), error=None)


@bp.post("/tokens/<id:token_id>/revoke")
def revoke_api_token(token_id: int) -> Any:
    """Revoke a token of this tenant with the reason given (audited): it stops authenticating at
    once (API and MCP). Without a reason nothing changes and the question is asked again."""
    actor = current_actor("admin")
    token = _tenant_token(token_id)
    reason = " ".join(request.form.get("reason", "").split())[:REASON_MAX]
    if not reason:
        page = render_template("admin/token_revoke.html", token=token, error="Give a reason: it goes into the audit log.")
        return page, 400
    if revoke_token(token, actor.user, "admin", reason):
        flash(f"Revoked token {token.id} ({token.name or 'unnamed'}) of {token.user.email}.", "info")
    else:
        flash(f"Token {token.id} was already revoked.", "info")
    return redirect(url_for("admin.tokens"))
