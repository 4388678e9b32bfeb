"""The form a READ/WRITE call that left fields out gets (MCP's form elicitation), and the
validation of the person's answer: WTForms, then the action's Input (DESIGN §3.2, §6.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from werkzeug.datastructures import MultiDict

from app.copilot.actions import Action, ActionContext, elicitation, needs_card_with, wtform_class
from app.copilot.hidden import removed
from app.errors import FormInvalid, FormNeedsCard


def form_for(action: type[Action], ctx: ActionContext, given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's values the action knows, and the elicitation to show; FormNeedsCard when the
    call, or every choice the form could offer, needs a card."""
    shape = action().ask(ctx, dict(given)) or {}
    known = set(action.Input.model_fields)
    given = {k: v for k, v in given.items() if k in known}
    if action.kind.needs_card or needs_card_with(action, given):  # the kind too, should needs_card() be overridden
        raise FormNeedsCard()
    form = elicitation(
        action.Input,
        shape.get("message") or f"A few details for {action.name.replace('_', ' ')}.",
        fields=shape.get("fields"),
        defaults={**given, **shape.get("defaults", {})},
        where=action.source,
    )
    return given, _card_free(action, given, form)


def _card_free(action: type[Action], given: dict[str, Any], form: dict[str, Any]) -> dict[str, Any]:
    """The form offers no choice that would need a card (DESIGN §6.6): each option is put to
    needs_card(), the one source. A required field left with no option: FormNeedsCard."""
    schema = form["requestedSchema"]
    for name, prop in list(schema["properties"].items()):
        if "oneOf" not in prop:
            continue
        prop["oneOf"] = [o for o in prop["oneOf"] if not needs_card_with(action, {**given, name: o["const"]})]
        if prop.get("default") not in [o["const"] for o in prop["oneOf"]]:
            prop.pop("default", None)
        if not prop["oneOf"]:
            if name in schema["required"]:
                raise FormNeedsCard()
            del schema["properties"][name]
    return form


def validate_form(
    schema: dict[str, Any], action: type[Action], given: dict[str, Any], values: Mapping[str, Any]
) -> tuple[BaseModel, list[str]]:
    """The Input to run with, and the names of the fields the person filled; FormInvalid otherwise."""
    formdata, errors = _formdata(schema, given, values)
    form = wtform_class(schema)(formdata=formdata)
    if not form.validate():
        for name, messages in form.errors.items():
            errors.setdefault(str(name), [str(m) for m in messages])  # a shape error says enough
    if errors:
        raise FormInvalid(errors)
    data = dict(given)
    filled = []
    for name in schema["properties"]:
        value = form.data[name]
        if value is None or value == "":
            data.pop(name, None)
            continue
        data[name] = value
        if name in values and str(formdata.get(name, "")).strip():
            filled.append(name)
    try:
        return action.Input.model_validate(data), filled
    except ValidationError as exc:
        raise FormInvalid({str(e["loc"][0]) if e["loc"] else "form": [e["msg"]] for e in exc.errors()}) from None


def _formdata(
    schema: dict[str, Any], given: dict[str, Any], values: Mapping[str, Any]
) -> tuple[MultiDict[str, str], dict[str, list[str]]]:
    """The answer as WTForms reads it (a kept pre-filled value included), and shape errors."""
    errors: dict[str, list[str]] = {}
    formdata: MultiDict[str, str] = MultiDict()
    for name in schema["properties"]:
        if name not in values:
            if given.get(name) not in (None, ""):
                formdata.add(name, removed(str(given[name])))  # the pre-filled value the person kept
            continue
        value = values[name]
        if isinstance(value, bool):
            value = "y" if value else ""
        elif isinstance(value, dict | list):
            errors[name] = ["Give a single value."]
            continue
        formdata.add(name, "" if value is None else str(value))
    return formdata, errors
