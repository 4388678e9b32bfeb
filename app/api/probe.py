"""A one-INSERT endpoint, mounted only with BENCH_PROBE=1: the benchmark's baseline."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from app.auth import current_actor
from app.extensions import csrf, db
from app.models import ProbeRow

bp = Blueprint("probe", __name__)
csrf.exempt(bp)


@bp.post("/_probe/insert")
def insert() -> Any:
    """Authenticate like the API, insert one row, commit."""
    from app.api import authenticate

    authenticate()
    actor = current_actor("api")
    db.session.add(ProbeRow(user_id=actor.user.id))
    db.session.commit()
    return jsonify(status="ok")
