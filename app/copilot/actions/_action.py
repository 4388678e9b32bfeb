"""The action API developers write against: Action, Kind, expose, ActionContext,
and the registry filled by discovering app/actions at start."""

from __future__ import annotations

import enum
import inspect
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session, scoped_session

from app.errors import ActionDeclarationError, NotFound
from app.models import ROW_ID_MAX
from app.status import Delivery as Delivery  # (part of the action API: `delivery = Delivery.QUEUED`)


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
    _found: dict[tuple[type, Any], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def find(self, model: type[M], ident: Any) -> M:
        """The record with this id inside the person's tenant; NotFound otherwise (also for an id
        no INTEGER column can hold, which the driver would refuse)."""
        if isinstance(ident, int) and not 0 < ident <= ROW_ID_MAX:
            raise NotFound(f"No {model.__name__.lower()} {ident} here.")
        held = self._found.get((model, ident))
        if held is not None and _as_read(held):
            return held  # type: ignore[no-any-return]
        row: M | None = self.db.scalar(
            sa.select(model).where(  # type: ignore[arg-type]
                model.id == ident,  # type: ignore[attr-defined]
                model.tenant_id == self.tenant.id,  # type: ignore[attr-defined]
            )
        )
        if row is None:
            raise NotFound(f"No {model.__name__.lower()} {ident} here.")
        self._found[(model, ident)] = row
        return row


def _as_read(row: Any) -> bool:
    """Whether a record find() read in this context still stands as read: still in its session,
    not deleted, nothing of it expired by a commit or a rollback since. authorize(), the card and
    handle() of one confirm then ask for it once, not three times; anything else reads it again."""
    state = sa.inspect(row)
    return state.persistent and not state.expired_attributes and row not in (state.session.deleted if state.session else ())


@dataclass(frozen=True)
class Countersign:
    """Who may give a card's second signature (the two-person rule): `allows(signer, ctx, input)`
    says whether this person of the tenant may; `label` names them in a few words ("admin",
    "finance lead"), stored with the card when it is made. The person who asked never may,
    whatever `allows` says."""

    label: str
    allows: Callable[[Any, ActionContext, Any], bool]


ADMIN = Countersign("admin", lambda signer, ctx, input: bool(signer.is_admin))
# `countersign = "admin"` (any admin of the tenant), a Countersign(label, allows), or, for a
# multi-operation tool, {operation: either of those}.
CountersignRule = str | Countersign | dict[str, str | Countersign] | None


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
    # The two-person rule: who must countersign a confirmed card before handle() runs (None: nobody).
    countersign: ClassVar[CountersignRule] = None
    # Input fields the person may edit on the card before confirming (never a secret): Edit opens
    # a form of these, and the edited input becomes a fresh card (revise.py).
    editable: ClassVar[tuple[str, ...]] = ()
    # When the work is over: at handle()'s return, or (Delivery.QUEUED, an EXTERNAL action's) when
    # the queue handle() handed it to delivers it — deliver() below says how that went.
    delivery: ClassVar[Delivery] = Delivery.NOW
    name: ClassVar[str] = ""
    source: ClassVar[str] = ""

    @classmethod
    def needs_card(cls, input: Any) -> bool:
        """A card for DESTRUCTIVE/EXTERNAL actions, and for operations in requires_approval."""
        return cls.kind.needs_card or operation_of(input) in cls.requires_approval

    @classmethod
    def countersigner(cls, input: Any) -> Countersign | None:
        """The rule for this call's second signature (None: the person's own is enough)."""
        rule = cls.countersign
        if isinstance(rule, dict):
            rule = rule.get(operation_of(input))
        if rule == "admin":
            return ADMIN
        return rule if isinstance(rule, Countersign) else None

    @classmethod
    def may_need_card(cls) -> bool:
        return cls.kind.needs_card or bool(cls.requires_approval)

    def authorize(self, ctx: ActionContext, input: Any) -> bool:
        """May ctx.user run this with this input? Default: yes."""
        return True

    def approval_reason(self, ctx: ActionContext, input: Any) -> str:
        """The card's sentence. For an operation in requires_approval, its template filled from
        approval_values(); DESTRUCTIVE and EXTERNAL actions must override it."""
        template = self.requires_approval.get(operation_of(input))
        if template is None:
            if self.reason:
                return self.reason
            raise NotImplementedError
        return fill(self, template, ctx, input)

    def approval_values(self, ctx: ActionContext, input: Any) -> dict[str, Any]:
        """The value of each template placeholder, RESOLVED from the validated input: what will
        really be acted on (the canonical path, the record's title), never the model's string.
        A placeholder naming a closed choice (a Literal or Enum field) need not be given."""
        return {}

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

    def deliver(self, ctx: ActionContext, input: Any) -> str | None:
        """For `delivery = Delivery.QUEUED`: deliver what handle() queued (a job, after handle()'s
        commit; `ctx.approval_id` is the key it queued it under). Its return is what the model
        reads (Sent); an exception, Failed to send; None, still queued (nothing could take it yet)."""
        raise NotImplementedError

    @classmethod
    def description(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or cls.name)


def operation_of(input: Any) -> str:
    """The call's operation as the requires_approval map spells it (an Enum member by its value)."""
    return _plain(getattr(input, "operation", None))


def _plain(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    return "" if value is None else str(value)


def fill(action: Action, template: str, ctx: ActionContext, input: Any) -> str:
    """A requires_approval template filled from approval_values() and the closed-choice fields:
    a placeholder with neither is the action's bug, and fails rather than print the raw argument."""
    from app.copilot.actions._schema import choices

    model: type[BaseModel] = type(input)
    values = {name: _plain(getattr(input, name, None)) for name in placeholders(template) if choices(model, name) is not None}
    values.update({name: _plain(value) for name, value in action.approval_values(ctx, input).items()})
    missing = [name for name in placeholders(template) if name not in values]
    if missing:
        raise ActionDeclarationError(
            f"{action.source}: {type(action).__name__}: approval_values() gave no value for "
            f"{', '.join('{' + m + '}' for m in missing)}. Fix: return it, resolved from your own records"
        )
    return template.format(**values)


class _Partial:
    """A call's values before they are complete: a field not given reads as None."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        return None


def needs_card_with(action: type[Action], values: dict[str, Any]) -> bool:
    """Would a call with these values (some perhaps missing) need a card? needs_card() stays the
    single source; when it cannot tell from incomplete values, the answer is yes."""
    defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in action.Input.model_fields.items()
        if not field.is_required()
    }
    try:
        return bool(action.needs_card(_Partial({**defaults, **values})))
    except Exception:  # a needs_card() that cannot read partial values: assume it needs a card
        return True


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
