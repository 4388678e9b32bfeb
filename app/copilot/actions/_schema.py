"""From an action's Input model to the shapes it is shown as: the model's tool schema and
MCP's form-elicitation object (flat primitives only), from which the browser form is built."""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

from pydantic import BaseModel

from app.copilot.hidden import removed
from app.errors import ActionDeclarationError

STRING_FORMATS = {"email", "uri", "date", "date-time"}
SECRET_NAME = re.compile(r"pass(word|wd|phrase)?|token|secret|api[_\- ]?key|card[_\- ]?(number|no)|cvc|cvv|pin$", re.I)


class NotAForm(ActionDeclarationError):
    """A field of Input cannot be shown as a flat form field."""


@functools.cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema, made once per Input class (pydantic makes it afresh on every call,
    about a millisecond; an app's start checked each action's several times, for every app and
    every `flask` command). Read-only: a caller that changes it takes a copy (tool_schema)."""
    return model.model_json_schema()


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema the model's tool definition carries."""
    schema = copy.deepcopy(_json_schema(model))
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


def is_secret(name: str, prop: dict[str, Any]) -> bool:
    """SecretStr, format password, or a name like password, token, API key, card number, CVC."""
    return prop.get("format") == "password" or bool(prop.get("writeOnly")) or bool(SECRET_NAME.search(name))


def secret_fields(model: type[BaseModel]) -> list[str]:
    props = _json_schema(model).get("properties", {})
    return [name for name, prop in props.items() if is_secret(name, _unwrap(prop, model, name))]


def _unwrap(prop: dict[str, Any], model: type[BaseModel], name: str, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Optional[X] -> X; a $ref to an enum -> the enum."""
    if "$ref" in prop:
        ref = prop["$ref"].rsplit("/", 1)[-1]
        target = (defs or _json_schema(model).get("$defs", {})).get(ref, {})
        return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    options = prop.get("anyOf")
    if options:
        real = [o for o in options if o.get("type") != "null"]
        if len(real) == 1:
            rest = {k: v for k, v in prop.items() if k != "anyOf"}
            return {**_unwrap(real[0], model, name, defs), **rest}
    return prop


@functools.cache
def choices(model: type[BaseModel], name: str) -> tuple[str, ...] | None:
    """The values a field may take when it is a closed set of strings (a Literal or an Enum), else
    None. Such a value is the developer's word, never the model's text."""
    schema = _json_schema(model)
    prop = schema.get("properties", {}).get(name)
    if prop is None:
        return None
    prop = _unwrap(prop, model, name, schema.get("$defs", {}))
    values = prop.get("enum") or ([prop["const"]] if "const" in prop else None)
    return tuple(values) if values and all(isinstance(v, str) for v in values) else None


def form_property(name: str, prop: dict[str, Any], where: str) -> dict[str, Any]:
    """One flat primitive property of an elicitation schema, or NotAForm naming the field."""
    out: dict[str, Any] = {"title": prop.get("title") or name.replace("_", " ").capitalize()}
    if prop.get("description"):
        out["description"] = prop["description"]
    if "default" in prop and prop["default"] is not None:
        out["default"] = prop["default"]
    kind = prop.get("type")
    if "enum" in prop or "const" in prop:
        values = prop.get("enum") or [prop["const"]]
        if not all(isinstance(v, str) for v in values):
            raise NotAForm(f"{where}: field {name!r} is an enum of non-strings. Fix: use string values")
        out["type"] = "string"
        out["oneOf"] = [{"const": v, "title": v.replace("_", " ").capitalize()} for v in values]
        return out
    if kind == "string":
        out["type"] = "string"
        fmt = prop.get("format")
        if fmt in STRING_FORMATS:
            out["format"] = fmt
        for key in ("minLength", "maxLength"):
            if key in prop:
                out[key] = prop[key]
        return out
    if kind in ("integer", "number"):
        out["type"] = kind
        for key in ("minimum", "maximum"):
            if key in prop:
                out[key] = prop[key]
        return out
    if kind == "boolean":
        out["type"] = "boolean"
        return out
    raise NotAForm(
        f"{where}: field {name!r} ({kind or 'complex type'}) cannot be a form field. "
        "Fix: use a string, number, integer, boolean or enum, or set ask_for_missing = False"
    )


def elicitation(
    model: type[BaseModel], message: str, fields: list[str] | None = None, defaults: dict[str, Any] | None = None, where: str = ""
) -> dict[str, Any]:
    """MCP's form elicitation: {"message", "requestedSchema": {type, properties, required}}, each
    field pre-filled from `defaults`."""
    schema = _json_schema(model)
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    names = fields or list(schema.get("properties", {}))
    properties: dict[str, Any] = {}
    for name in names:
        prop = _unwrap(schema["properties"][name], model, name, defs)
        properties[name] = form_property(name, prop, where or model.__qualname__)
        if defaults and defaults.get(name) not in (None, ""):
            # What pre-fills a field is what its Submit sends: text without hidden characters
            # (a U+202E would show "troper" as "report"), on every channel that shows the form.
            value = defaults[name]
            properties[name]["default"] = removed(value) if isinstance(value, str) else value
    return {
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": [n for n in names if n in required],
        },
    }


def wtform_class(requested_schema: dict[str, Any]) -> type[Any]:
    """A WTForms form with one field per property of the elicitation schema (and nothing else)."""
    from wtforms import Form

    required = set(requested_schema.get("required", []))
    fields = {name: _form_field(name, prop, name in required) for name, prop in requested_schema["properties"].items()}
    return type("ElicitationForm", (Form,), fields)


def _form_field(name: str, prop: dict[str, Any], required: bool) -> Any:
    """One unbound WTForms field for a form_property: a select for a closed set, a checkbox, a number
    box, or a text field (_text_field)."""
    from wtforms import BooleanField, FloatField, IntegerField, SelectField, validators
    from wtforms.fields.choices import SelectChoice

    checks: list[Any] = [validators.InputRequired() if required else validators.Optional()]
    label = prop.get("title", name)
    extra = {"description": prop.get("description", ""), "default": prop.get("default")}
    kind = prop["type"]
    if "oneOf" in prop:
        choices = [SelectChoice(o["const"], o["title"]) for o in prop["oneOf"]]
        if not required:
            choices = [SelectChoice("", "—"), *choices]
        return SelectField(label, checks, choices=choices, **extra)
    if kind == "boolean":
        return BooleanField(label, [validators.Optional()], **extra)
    if kind in ("integer", "number"):
        checks.append(validators.NumberRange(min=prop.get("minimum"), max=prop.get("maximum")))
        return (IntegerField if kind == "integer" else FloatField)(label, checks, **extra)
    return _text_field(prop, label, checks, extra)


def _text_field(prop: dict[str, Any], label: str, checks: list[Any], extra: dict[str, Any]) -> Any:
    """A string property's field, its length checked: an email, URL, date or date-time box by its
    format, else a multi-line box for long text (over 200 characters, or no limit) and a line for short."""
    from wtforms import DateField, DateTimeLocalField, EmailField, StringField, TextAreaField, URLField, validators

    if "minLength" in prop or "maxLength" in prop:
        checks.append(validators.Length(min=prop.get("minLength", -1), max=prop.get("maxLength", -1)))
    fmt = prop.get("format")
    if fmt == "email":
        checks.append(validators.Email())
    elif fmt == "uri":
        checks.append(validators.URL())
    by_format: dict[str | None, Any] = {"email": EmailField, "uri": URLField, "date": DateField, "date-time": DateTimeLocalField}
    field_class = by_format.get(fmt) or (TextAreaField if prop.get("maxLength", 10_000) > 200 else StringField)
    return field_class(label, checks, **extra)
