"""From an action's Input model to the schemas it is shown as."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema the model's tool definition carries."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def required_fields(model: type[BaseModel]) -> list[str]:
    """Names of the fields a call must give."""
    return [name for name, field in model.model_fields.items() if field.is_required()]


def missing_fields(model: type[BaseModel], arguments: dict[str, Any]) -> list[str]:
    """Required fields the call left out (or gave as null or blank)."""
    return [
        name
        for name in required_fields(model)
        if arguments.get(name) is None or (isinstance(arguments.get(name), str) and not arguments[name].strip())
    ]
