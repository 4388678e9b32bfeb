"""The action API developers write against: Action, Kind, expose, ActionContext,
and the registry filled by discovering app/actions at start."""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
import re
import string
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session, scoped_session

from app.errors import ActionDeclarationError, NotFound
from app.models import ROW_ID_MAX


class Kind(enum.StrEnum):
    """What an action does to the world; DESTRUCTIVE and EXTERNAL need a card."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    EXTERNAL = "external"

    @property
    def needs_card(self) -> bool:
        return self in (Kind.DESTRUCTIVE, Kind.EXTERNAL)

    @property
    def done_label(self) -> str:
        """The card's outcome row once the action ran, unless the action names its own."""
        return {Kind.DESTRUCTIVE: "Removed", Kind.EXTERNAL: "Sent"}.get(self, "Done")


M = TypeVar("M")


@dataclass
class ActionContext:
    """Who is acting, in which tenant, with which database session."""

    user: Any
    tenant: Any
    db: Session | scoped_session[Any]
    channel: str = "web"
    approval_id: str | None = None  # set while a confirmed card runs: the idempotency key

    def find(self, model: type[M], ident: Any) -> M:
        """The record with this id inside the person's tenant; NotFound otherwise (also for an id
        no INTEGER column can hold, which the driver would refuse)."""
        if isinstance(ident, int) and not 0 < ident <= ROW_ID_MAX:
            raise NotFound(f"No {model.__name__.lower()} {ident} here.")
        row: M | None = self.db.scalar(
            sa.select(model).where(  # type: ignore[arg-type]
                model.id == ident,  # type: ignore[attr-defined]
                model.tenant_id == self.tenant.id,  # type: ignore[attr-defined]
            )
        )
        if row is None:
            raise NotFound(f"No {model.__name__.lower()} {ident} here.")
        return row


class Action:
    """Base class for an action. Subclass it in app/actions/<verb_noun>.py."""

    kind: ClassVar[Kind] = Kind.READ
    Input: ClassVar[type[BaseModel]]
    examples: ClassVar[list[str]] = []
    ask_for_missing: ClassVar[bool] = False
    done_label: ClassVar[str] = ""  # the card's outcome row once it ran; default from the kind
    reason: ClassVar[str] = ""  # a card sentence that never changes (else define approval_reason)
    toolsets: ClassVar[tuple[str, ...]] = ()
    # Multi-operation tools: operation -> the card's sentence, "{field}" filled from the input.
    requires_approval: ClassVar[dict[str, str]] = {}
    # Input fields whose values the card may show (`actions check` allows them on the card).
    shows: ClassVar[tuple[str, ...]] = ()
    name: ClassVar[str] = ""
    source: ClassVar[str] = ""

    @classmethod
    def needs_card(cls, input: Any) -> bool:
        """A card for DESTRUCTIVE/EXTERNAL actions, and for operations in requires_approval."""
        return cls.kind.needs_card or getattr(input, "operation", None) in cls.requires_approval

    @classmethod
    def may_need_card(cls) -> bool:
        return cls.kind.needs_card or bool(cls.requires_approval)

    def authorize(self, ctx: ActionContext, input: Any) -> bool:
        """May ctx.user run this with this input? Default: yes."""
        return True

    def approval_reason(self, ctx: ActionContext, input: Any) -> str:
        """The card's sentence. For an operation in requires_approval, its filled template;
        DESTRUCTIVE and EXTERNAL actions must override it."""
        template = self.requires_approval.get(getattr(input, "operation", None) or "")
        if template is None:
            if self.reason:
                return self.reason
            raise NotImplementedError
        return template.format(**{k: _plain(v) for k, v in input.model_dump().items()})

    def ask(self, ctx: ActionContext, given: dict[str, Any]) -> dict[str, Any]:
        """Shape the form for a call that left fields out: {"message", "fields", "defaults"}.
        `given` holds the model's arguments. Default: every field, the model's values filled in."""
        return {}

    def approval_summary(self, ctx: ActionContext, input: Any) -> dict[str, Any]:
        """The card's rows, label -> value, read from the server's own records."""
        return {}

    def handle(self, ctx: ActionContext, input: Any) -> Any:
        """Do the work; the return value (made a string) is what the model reads."""
        raise NotImplementedError

    @classmethod
    def description(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or cls.name)


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


def placeholders(template: str) -> list[str]:
    """The field names a requires_approval template uses."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


A = TypeVar("A", bound=type[Action])


def expose(*toolsets: str) -> Any:
    """Make an action reachable by agents through the named toolsets."""

    def mark(cls: A) -> A:
        cls.toolsets = tuple(toolsets)
        return cls

    return mark


def snake(name: str) -> str:
    """DeletePost -> delete_post."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass
class Registry:
    """Actions by tool name."""

    actions: dict[str, type[Action]] = field(default_factory=dict)

    def get(self, name: str) -> type[Action] | None:
        return self.actions.get(name)

    def exposed(self, toolsets: list[str] | None = None) -> list[type[Action]]:
        """Actions reachable by an agent. READ/WRITE actions without a toolset are always
        reachable; otherwise the action must share a toolset with the list given."""
        out = []
        for action in self.actions.values():
            if not action.toolsets:
                if action.may_need_card():
                    continue
                out.append(action)
            elif toolsets is None or set(action.toolsets) & set(toolsets):
                out.append(action)
        return sorted(out, key=lambda a: a.name)


def discover(package: str | ModuleType = "app.actions") -> Registry:
    """Import every module of the package and register the Action subclasses it defines."""
    pkg = importlib.import_module(package) if isinstance(package, str) else package
    registry = Registry()
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Action)
                and obj is not Action
                and obj.__module__ == module.__name__
            ):
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
    fields = set(input_model.model_fields)  # type: ignore[union-attr]
    if action.requires_approval:
        if "operation" not in fields:
            fail("requires_approval maps operations, but Input has no `operation` field",
                 "add `operation: Literal[...]` to Input", "requires_approval")
        for operation, template in action.requires_approval.items():
            unknown = [p for p in placeholders(template) if p not in fields]
            if unknown:
                fail(f"the {operation!r} template names {', '.join('{' + u + '}' for u in unknown)}, "
                     f"which Input does not have (fields: {', '.join(sorted(fields))})",
                     "use only Input's field names as placeholders", "requires_approval")
    if action.may_need_card():
        what = f"a {action.kind.value} action" if action.kind.needs_card else "an action with requires_approval"
        if not action.toolsets:
            fail(
                f"{what} must be exposed through a named toolset",
                f'decorate it with @expose("<toolset>") (e.g. @expose("{action.name.split("_")[-1]}"))',
            )
        if action.kind.needs_card and action.approval_reason is Action.approval_reason and not action.reason:
            fail(
                f"{what} needs a card sentence",
                "set reason = \"…?\" or define approval_reason(self, ctx, input) returning the question",
            )
    if action.ask_for_missing and not action.kind.needs_card:
        from app.copilot.schema import elicitation, secret_fields

        secrets = secret_fields(action.Input)
        if secrets:
            fail(f"ask_for_missing is set, but {', '.join(secrets)} is a secret, which a form never asks for",
                 "remove ask_for_missing, or take the secret from settings instead of the person", "ask_for_missing")
        elicitation(action.Input, "", where=f"{where}:{_line_of(action, 'Input')}")  # NotAForm names the field
    if action.handle is Action.handle:
        fail("it has no handle()", "define handle(self, ctx, input)")
    if action.name in registry.actions:
        fail(f"the name {action.name!r} is taken by {registry.actions[action.name].source}",
             "rename the class or set name = '...'")
    registry.actions[action.name] = action


def _line_of(cls: type, attribute: str | None = None) -> int | None:
    """The line of the class (its decorator), or of the line inside it that sets `attribute`."""
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
