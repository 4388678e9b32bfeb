"""The API's blueprint, `api`, and what all its views share: who is asking (a bearer token, or the
browser session with its CSRF header), the JSON body, the person's own conversation; and its one
open route, the OpenAPI document."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, g, jsonify, request
from flask_login import current_user

from app.api.openapi import document
from app.auth import bearer_token
from app.copilot import conversations
from app.copilot.approvals import Actor
from app.extensions import csrf
from app.json_body import json_object
from app.models import Conversation

bp = Blueprint("api", __name__)
csrf.exempt(bp)


@bp.before_request
def authenticate() -> None:
    """Bearer token, or the browser session with its CSRF header on every write."""
    if request.endpoint == "api.openapi":
        return
    g.api_token = bearer_token()
    if g.api_token is None:
        if not current_user.is_authenticated:
            abort(401)
        if request.method not in ("GET", "HEAD", "OPTIONS"):  # POST, PATCH, DELETE
            csrf.protect()


def body() -> dict[str, Any]:
    """The JSON object sent; a 400 naming what is wrong otherwise (app.json_body)."""
    return json_object()


def own_conversation(conversation_id: int, actor: Actor) -> Conversation:
    """The person's own live conversation; 404 for anyone else's, another tenant's, a deleted one."""
    return conversations.own(conversation_id, actor.user)


@bp.get("/openapi.json")
def openapi() -> Any:
    return jsonify(document())
