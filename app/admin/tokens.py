"""The admin console's tokens page: every personal access token of the admin's tenant, with its
scope and toolsets; a new token for a person of the tenant (its secret shown once), and Revoke
with a reason (both audited). Registered on the admin blueprint (admins only)."""

from __future__ import annotations

from typing import Any

from flask import flash, make_response, redirect, render_template, request, url_for

from app.admin.blueprint import bp
from app.auth import SCOPES, current_actor, issue_token, known_toolsets, revoke_with_reason, tenant_token, tenant_tokens
from app.copilot import review
from app.errors import BadValues
from app.extensions import db
from app.models import ROW_ID_MAX, User

PAGE = 500


@bp.get("/tokens")
def tokens() -> Any:
    """The tenant's tokens, newest first (never the tokens themselves: only their hashes are
    kept), and the form that makes one."""
    return tokens_page()


def tokens_page(error: str | None = None, status: int = 200) -> Any:
    """The tokens page, with an error above the form when a new token was refused."""
    tenant_id = current_actor("admin").user.tenant_id
    rows = [(token, token.user.email) for token in tenant_tokens(tenant_id, PAGE)]
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
    raw = request.form.get("person", "")
    person = db.session.get(User, int(raw)) if raw.isdigit() and 0 < int(raw) <= ROW_ID_MAX else None
    scope, wanted, name = request.form.get("scope", "agent"), request.form.getlist("toolsets"), request.form.get("name", "")
    try:
        secret = issue_token(actor.user, person, name, scope, wanted, "admin")
    except BadValues as error:
        return tokens_page(error.message, error.status)
    assert person is not None  # (issue_token refuses no one)
    shown = {"email": person.email, "name": name.strip(), "scope": scope, "toolsets": ",".join(dict.fromkeys(wanted))}
    page = render_template("admin/token_created.html", secret=secret, **shown)
    response = make_response(page, 201)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.get("/tokens/<id:token_id>/revoke")
def confirm_revoke(token_id: int) -> Any:
    """Ask before revoking: the token, whose it is, and a reason to give (nothing changes here)."""
    token = tenant_token(current_actor("admin").user, token_id)
    return render_template("admin/token_revoke.html", token=token, error=None)


@bp.post("/tokens/<id:token_id>/revoke")
def revoke_api_token(token_id: int) -> Any:
    """Revoke a token of this tenant with the reason given (audited): it stops authenticating at
    once (API and MCP). Without a reason nothing changes and the question is asked again."""
    actor = current_actor("admin")
    token = tenant_token(actor.user, token_id)
    try:
        revoked = revoke_with_reason(token, actor.user, request.form.get("reason", ""), "admin")
    except BadValues as error:
        return render_template("admin/token_revoke.html", token=token, error=error.message), error.status
    if revoked:
        flash(f"Revoked token {token.id} ({token.name or 'unnamed'}) of {token.user.email}.", "info")
    else:
        flash(f"Token {token.id} was already revoked.", "info")
    return redirect(url_for("admin.tokens"))
