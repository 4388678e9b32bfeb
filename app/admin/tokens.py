"""The admin console's tokens page: every personal access token of the admin's tenant, with its
scope and toolsets, and Revoke (audited). Registered on the admin blueprint (admins only)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import flash, redirect, render_template, url_for

from app.admin import bp
from app.auth import current_actor, revoke_token
from app.errors import NotFound
from app.extensions import db
from app.models import ApiToken, User

PAGE = 500


@bp.get("/tokens")
def tokens() -> Any:
    """The tenant's tokens, newest first (never the tokens themselves: only their hashes are kept)."""
    actor = current_actor("admin")
    rows = db.session.execute(
        sa.select(ApiToken, User.email)
        .join(User, ApiToken.user_id == User.id)
        .where(User.tenant_id == actor.user.tenant_id)
        .order_by(ApiToken.id.desc())
        .limit(PAGE)
    ).all()
    return render_template("admin/tokens.html", rows=rows)


@bp.post("/tokens/<id:token_id>/revoke")
def revoke_api_token(token_id: int) -> Any:
    """Revoke a token of this tenant: it stops authenticating at once (API and MCP). Another
    tenant's token looks like no token at all (404)."""
    actor = current_actor("admin")
    token = db.session.get(ApiToken, token_id)
    if token is None or token.user.tenant_id != actor.user.tenant_id:
        raise NotFound()
    if revoke_token(token, actor.user, "admin"):
        flash(f"Revoked token {token.id} ({token.name or 'unnamed'}) of {token.user.email}.", "info")
    else:
        flash(f"Token {token.id} was already revoked.", "info")
    return redirect(url_for("admin.tokens"))
