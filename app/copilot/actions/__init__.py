"""The action API developers write against (`from app.copilot.actions import Action, Kind, expose`),
the registry discovery fills at start, and the shapes an action's Input is shown as (the model's
tool schema, MCP's form). Its modules are private: this list is the package."""

from __future__ import annotations

from flask import current_app

from app.copilot.actions._action import (
    ADMIN,
    Action,
    ActionContext,
    Countersign,
    Delivery,
    Kind,
    Registry,
    expose,
    fill,
    needs_card_with,
    placeholders,
    snake,
)
from app.copilot.actions._discovery import discover, register
from app.copilot.actions._schema import (
    choices,
    elicitation,
    missing_fields,
    secret_fields,
    tool_schema,
    wtform_class,
)

__all__ = [
    "ADMIN",
    "Action",
    "ActionContext",
    "Countersign",
    "Delivery",
    "Kind",
    "Registry",
    "choices",
    "discover",
    "elicitation",
    "expose",
    "fill",
    "missing_fields",
    "needs_card_with",
    "placeholders",
    "register",
    "registry",
    "secret_fields",
    "snake",
    "tool_schema",
    "wtform_class",
]


def registry() -> Registry:
    """The app's actions: its engine's registry (create_app makes the engine; a test may swap it)."""
    found: Registry = current_app.extensions["countersign"].registry
    return found
