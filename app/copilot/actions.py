"""The action API developers write against: Action, Kind, expose, ActionContext,
and the registry filled by discovering app/actions at start."""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session, scoped_session

from app.errors import ActionDeclarationError, NotFound


class Kind(enum.StrEnum):
    """What an action does to the world; DESTRUCTIVE and EXTERNAL need a card."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    EXTERNAL = "external"

    @property
    def needs_card(self) -> bool:
        return self in (Kind.DESTRUCTIVE, Kind.EXTERNAL)


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
        """The record with this id inside the person's tenant; NotFound otherwise."""
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
    done_label: ClassVar[str] = "Done"  # the card's outcome row once it ran, e.g. "Removed"
    toolsets: ClassVar[tuple[str, ...]] = ()
    name: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def authorize(self, ctx: ActionContext, input: Any) -> bool:
        """May ctx.user run this with this input? Default: yes."""
        return True

    def approval_reason(self, ctx: ActionContext, input: Any) -> str:
        """The card's sentence; DESTRUCTIVE and EXTERNAL actions must override it."""
        raise NotImplementedError

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
                if action.kind.needs_card:
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
    line = _line_of(action)
    at = f"{where}:{line}" if line else where

    def fail(problem: str, fix: str) -> None:
        raise ActionDeclarationError(f"{at}: {action.__name__}: {problem}. Fix: {fix}")

    input_model = getattr(action, "Input", None)
    if not (inspect.isclass(input_model) and issubclass(input_model, BaseModel)):
        fail("Input is not a pydantic model", "declare `class Input(BaseModel): ...` inside it")
    if not isinstance(action.kind, Kind):
        fail(f"kind {action.kind!r} is not a Kind", "set kind = Kind.READ/WRITE/DESTRUCTIVE/EXTERNAL")
    if action.kind.needs_card:
        if not action.toolsets:
            fail(
                f"a {action.kind.value} action must be exposed through a named toolset",
                f'decorate it with @expose("<toolset>") (e.g. @expose("{action.name.split("_")[-1]}"))',
            )
        if action.approval_reason is Action.approval_reason:
            fail(
                f"a {action.kind.value} action needs a card sentence",
                "define approval_reason(self, ctx, input) returning the question the person answers",
            )
    if action.ask_for_missing and not action.kind.needs_card:
        from app.copilot.schema import elicitation

        elicitation(action.Input, "", where=at)  # raises NotAForm naming the field and the fix
    if action.handle is Action.handle:
        fail("it has no handle()", "define handle(self, ctx, input)")
    if action.name in registry.actions:
        fail(f"the name {action.name!r} is taken by {registry.actions[action.name].source}",
             "rename the class or set name = '...'")
    registry.actions[action.name] = action


def _line_of(obj: Any) -> int | None:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None
