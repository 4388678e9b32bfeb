"""The admin console's channels page: every linked chat account and address of the tenant's
people, and Remove (audited). Registered on the admin blueprint (admins only)."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, render_template, url_for

from app.admin.blueprint import bp
from app.auth import current_actor, links


@bp.get("/channels")
def channels() -> Any:
    """The tenant's linked accounts, by person."""
    return render_template("admin/channels.html", rows=links.tenant_links(current_actor("admin").user.tenant_id))


@bp.post("/channels/<id:identity_id>/remove")
def remove_channel(identity_id: int) -> Any:
    """Remove a person's linked account (one of this tenant's; any other is a 404)."""
    identity = links.unlink(identity_id, current_actor("admin").user, admin=True)
    flash(f"Removed {identity.connector} account {identity.external_id} of {identity.user.email}.", "info")
    return redirect(url_for("admin.channels"))
