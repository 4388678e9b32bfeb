"""Discovering the developers' actions and checking each declaration at start: a mistake fails
the app's start naming the file, the line and the fix (DESIGN §2)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from types import ModuleType

from pydantic import BaseModel

from app.copilot.actions._action import Action, Countersign, Kind, Registry, needs_card_with, placeholders, snake
from app.errors import ActionDeclarationError
from app.status import Delivery

Fail = Callable[..., None]  # fail(problem, fix, attribute=None): raises ActionDeclarationError


def discover(package: str | ModuleType = "app.actions") -> Registry:
    """Import every module of the package and register the Action subclasses it defines."""
    pkg = importlib.import_module(package) if isinstance(package, str) else package
    registry = Registry()
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Action) and obj is not Action and obj.__module__ == module.__name__:
                register(registry, obj, module)
    return registry


def register(registry: Registry, action: type[Action], module: ModuleType) -> None:
    """Check one action's declaration and add it, or fail naming the file and the fix."""
    where = getattr(module, "__file__", module.__name__)
    action.name = action.name if "name" in vars(action) else snake(action.__name__)
    action.source = where

    def fail(problem: str, fix: str, attribute: str | None = None) -> None:
        line = _line_of(action, attribute)
        at = f"{where}:{line}" if line else where
        raise ActionDeclarationError(f"{at}: {action.__name__}: {problem}. Fix: {fix}")

    input_model = getattr(action, "Input", None)
    if not (inspect.isclass(input_model) and issubclass(input_model, BaseModel)):
        fail("Input is not a pydantic model", "declare `class Input(BaseModel): ...` inside it", "Input")
    if not isinstance(action.kind, Kind):
        fail(f"kind {action.kind!r} is not a Kind", "set kind = Kind.READ/WRITE/DESTRUCTIVE/EXTERNAL")
    if action.requires_approval:
        _check_operations(action, fail)
    if action.may_need_card():
        _check_card(action, fail)
    if action.ask_for_missing and not action.kind.needs_card:
        _check_form(action, fail, where)
    if action.countersign is not None:
        _check_countersign(action, fail)
    if action.editable:
        _check_editable(action, fail, where)
    if action.handle is Action.handle:
        fail("it has no handle()", "define handle(self, ctx, input)")
    _check_delivery(action, fail)
    if action.name in registry.actions:
        fail(
            f"the name {action.name!r} is taken by {registry.actions[action.name].source}", "rename the class or set name = '...'"
        )
    registry.actions[action.name] = action


def _check_card(action: type[Action], fail: Fail) -> None:
    """An action that may need a card is reachable only through a named toolset, and has a sentence."""
    what = f"a {action.kind.value} action" if action.kind.needs_card else "an action with requires_approval"
    if not action.toolsets:
        fail(
            f"{what} must be exposed through a named toolset",
            f'decorate it with @expose("<toolset>") (e.g. @expose("{action.name.split("_")[-1]}"))',
        )
    if action.kind.needs_card and action.approval_reason is Action.approval_reason and not action.reason:
        fail(
            f"{what} needs a card sentence",
            'set reason = "…?" or define approval_reason(self, ctx, input) returning the question',
        )


def _check_form(action: type[Action], fail: Fail, where: str) -> None:
    """ask_for_missing: the form never asks for a secret, and can still choose some operation."""
    from app.copilot.actions._schema import choices, elicitation, secret_fields

    secrets = secret_fields(action.Input)
    if secrets:
        fail(
            f"ask_for_missing is set, but {', '.join(secrets)} is a secret, which a form never asks for",
            "remove ask_for_missing, or take the secret from settings instead of the person",
            "ask_for_missing",
        )
    elicitation(action.Input, "", where=f"{where}:{_line_of(action, 'Input')}")  # NotAForm names the field
    if action.requires_approval and all(
        needs_card_with(action, {"operation": o}) for o in choices(action.Input, "operation") or ()
    ):
        fail(
            "ask_for_missing is set, but every operation needs a card, and a form never chooses one",
            "remove ask_for_missing",
            "ask_for_missing",
        )


def _check_editable(action: type[Action], fail: Fail, where: str) -> None:
    """editable: fields of Input, never a secret, on an action that has a card, each one a field a
    form can show (the Edit form is an elicitation of exactly these)."""
    from app.copilot.actions._schema import elicitation, secret_fields

    if isinstance(action.editable, str) or not all(isinstance(n, str) for n in action.editable):
        fail("editable is not a tuple of field names", 'write editable = ("subject", "body")', "editable")
    if not action.may_need_card():
        fail("editable is set, but this action never shows a card to edit", "remove editable", "editable")
    unknown = [n for n in action.editable if n not in action.Input.model_fields]
    if unknown:
        fail(
            f"editable names {', '.join(unknown)}, which Input does not have (fields: {', '.join(action.Input.model_fields)})",
            "use only Input's field names",
            "editable",
        )
    secrets = [n for n in action.editable if n in secret_fields(action.Input)]
    if secrets:
        fail(
            f"editable names {', '.join(secrets)}, a secret, which a form never shows or asks for",
            f"remove {', '.join(secrets)} from editable",
            "editable",
        )
    elicitation(action.Input, "", fields=list(action.editable), where=f"{where}:{_line_of(action, 'editable')}")


def _check_operations(action: type[Action], fail: Fail) -> None:
    """A requires_approval map must be unmissable: `operation` a closed choice that has every
    mapped operation (a free string could spell "delete" another way and skip its card), and
    each template placeholder a field that is a closed choice or resolved by approval_values()."""
    from app.copilot.actions._schema import choices

    fields = set(action.Input.model_fields)
    if "operation" not in fields:
        fail(
            "requires_approval maps operations, but Input has no `operation` field",
            "add `operation: Literal[...]` to Input",
            "requires_approval",
        )
    options = choices(action.Input, "operation")
    if options is None:
        fail(
            "requires_approval maps operations, but `operation` is not a closed choice, so another "
            "spelling of an operation would skip its card",
            "declare `operation: Literal[...]`",
            "requires_approval",
        )
    strays = [op for op in action.requires_approval if op not in (options or ())]
    if strays:
        fail(
            f"requires_approval names {', '.join(map(repr, strays))}, which `operation` does not allow "
            f"(it allows {', '.join(map(repr, options or ()))}), so that card would never be asked for",
            "use the operation names of Input's Literal",
            "requires_approval",
        )
    for operation, template in action.requires_approval.items():
        unknown = [p for p in placeholders(template) if p not in fields]
        if unknown:
            fail(
                f"the {operation!r} template names {', '.join('{' + u + '}' for u in unknown)}, "
                f"which Input does not have (fields: {', '.join(sorted(fields))})",
                "use only Input's field names as placeholders",
                "requires_approval",
            )
        free = [p for p in placeholders(template) if choices(action.Input, p) is None]
        if free and action.approval_values is Action.approval_values:
            fail(
                f"the {operation!r} template would print the model's own text for "
                f"{', '.join('{' + f + '}' for f in free)} on the card",
                f"define approval_values(self, ctx, input) returning {{{free[0]!r}: <the resolved value, "
                "from your own records>}",
                "requires_approval",
            )


def _check_countersign(action: type[Action], fail: Fail) -> None:
    """The two-person rule names who may countersign, and only for calls that get a card (a
    second signature on no first one would never be asked for)."""
    rule = action.countersign
    how = 'countersign = "admin", or countersign = Countersign("<who>", lambda signer, ctx, input: <bool>)'
    if isinstance(rule, dict):
        if action.kind.needs_card:
            fail("countersign maps operations, but every call of this action gets a card", how, "countersign")
        strays = [op for op in rule if op not in action.requires_approval]
        if strays:
            fail(
                f"countersign names {', '.join(map(repr, strays))}, which requires_approval does not, so no card "
                "of it would ever be countersigned",
                f"name only operations of requires_approval ({', '.join(map(repr, action.requires_approval))})",
                "countersign",
            )
        rules = list(rule.values())
    else:
        if not action.kind.needs_card:
            fail(
                "countersign is set on an action whose calls may run without a card",
                'map the operations that need a card: countersign = {"<operation>": "admin"}',
                "countersign",
            )
        rules = [rule] if rule is not None else []
    for one in rules:
        if one == "admin":
            continue
        if not isinstance(one, Countersign) or not callable(one.allows):
            fail(f"countersign {one!r} names nobody", how, "countersign")
        elif not one.label.strip() or len(one.label) > 100:
            fail("a countersign rule's label must say who may sign, in at most 100 characters", how, "countersign")


def _check_delivery(action: type[Action], fail: Fail) -> None:
    """Queued delivery is an EXTERNAL action's (its card says Queued, then Sent or Failed to send),
    and it names how a delivery ends: deliver(). A deliver() nothing would call is a mistake too."""
    if not isinstance(action.delivery, Delivery):
        fail(f"delivery {action.delivery!r} is not a Delivery", "set delivery = Delivery.NOW or Delivery.QUEUED", "delivery")
    if action.delivery is Delivery.QUEUED and action.kind is not Kind.EXTERNAL:
        fail(
            f"delivery = Delivery.QUEUED on a {action.kind.value} action: only an EXTERNAL action's work goes out "
            "through a queue",
            "set kind = Kind.EXTERNAL, or drop `delivery`",
            "delivery",
        )
    defines_deliver = action.deliver is not Action.deliver
    if action.delivery is Delivery.QUEUED and not defines_deliver:
        fail(
            "delivery = Delivery.QUEUED, but nothing says how a delivery ends",
            "define deliver(self, ctx, input): send what handle() queued under ctx.approval_id, return what the "
            "model reads (raise when it could not be sent, return None while it waits)",
            "delivery",
        )
    if defines_deliver and action.delivery is not Delivery.QUEUED:
        fail("it defines deliver(), which runs only for queued delivery", "set delivery = Delivery.QUEUED", "deliver")


def _line_of(cls: type, attribute: str | None = None) -> int | None:
    """The line of the class (its decorator), or of the line inside it that sets `attribute`
    (kept: finding a class's source parses its module, and every new app registers its actions)."""
    key = (cls, attribute)
    if key not in _lines:
        _lines[key] = _find_line(cls, attribute)
    return _lines[key]


_lines: dict[tuple[type, str | None], int | None] = {}


def _find_line(cls: type, attribute: str | None) -> int | None:
    try:
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    if attribute:
        pattern = re.compile(rf"^\s*(class\s+{attribute}\b|{attribute}\s*[:=])")
        for offset, text in enumerate(lines):
            if pattern.match(text):
                return start + offset
    return start
