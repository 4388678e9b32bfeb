"""The agent loop, the engine's side: each tool call the model makes is validated, authorized,
run or paused on a card; the saved run resumes with the people's answers. Nothing is held in
memory between requests. The pydantic-ai agent that makes the calls is app.copilot.loop's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flask import current_app
from pydantic import BaseModel, ValidationError

from app.copilot import approvals, audit
from app.copilot.actions import Action, ActionContext, Registry, missing_fields, needs_card_with, secret_fields
from app.copilot.approvals import Actor, short
from app.copilot.starting import for_channel
from app.copilot.turns import _llm as llm
from app.copilot.turns import _runs as runs
from app.errors import CountersignError, FormNeedsCard, NotFound, TooManyPending
from app.extensions import DATABASE_AWAY, db
from app.models import Approval, Run, User
from app.status import RunStatus

if TYPE_CHECKING:
    from pydantic_ai.models import Model

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """What a tool call needs during one pass of the agent: the deps of the run. `allowed` names
    the actions this run's credential reaches (None: every tool the agent has)."""

    ctx: ActionContext
    run: Run
    registry: Registry
    step: int
    created: list[Approval] = field(default_factory=list)
    allowed: frozenset[str] | None = None
    ran: int = 0  # tool calls this pass made (answers decided before it, by people, are not its own)
    # Its calls run one at a time, in the order the model made them (turns._loop): they share the
    # pass's session, and pydantic-ai runs a response's calls side by side.
    calls: asyncio.Lock = field(default_factory=asyncio.Lock)

    def reaches(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed


class Paused(Exception):
    """call_action made a card or a form: the call waits for the person's answer."""

    def __init__(self, approval: Approval) -> None:
        super().__init__(approval.id)
        self.approval = approval


class BadArguments(Exception):
    """The model's arguments do not validate; the message says why, and the model may try again."""


class Engine:
    """The registry and the model's settings, per app. The pydantic-ai agent and models made from
    them are app.copilot.loop's, which only the turn executor imports: start-up does not import
    pydantic-ai (~0.6 s); a process's first turn does."""

    def __init__(
        self,
        registry: Registry,
        model_spec: str,
        base_url: str | None,
        toolsets: list[str],
        max_steps: int,
        api_key: str | None = None,
        timeout: float = 60.0,
        word_pause: float = 0.0,
    ) -> None:
        llm.check(model_spec)  # a wrong COUNTERSIGN_MODEL fails at start
        self.registry = registry
        self.model_spec = model_spec
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.word_pause = word_pause  # the offline model's, between words
        self.toolsets = toolsets
        self.max_steps = max_steps
        self.fixed: Model | None = None  # in place of COUNTERSIGN_MODEL's (use_model)

    def use_model(self, model: Model) -> None:
        """Swap the model (tests queue a scripted one)."""
        self.fixed = model

    def reachable(self, toolsets: Sequence[str] | None) -> frozenset[str]:
        """The names of the actions a credential limited to `toolsets` reaches (None: all the
        app's COUNTERSIGN_TOOLSETS); never more than the app's."""
        return frozenset(a.name for a in self.registry.exposed(list(runs.narrow(self.toolsets, toolsets) or ())))


def engine() -> Engine:
    """The app's engine (made by create_app)."""
    found: Engine = current_app.extensions["countersign"]
    return found


def call_action(turn: Turn, action: type[Action], arguments: dict[str, Any], tool_call_id: str) -> str:
    """DESIGN §3: validate, authorize, then run now, or pause on a card. An action outside the
    credential's toolsets is refused first (the model was not offered it either). Raises Paused
    on a card or a form, BadArguments when the arguments do not validate."""
    ctx = turn.ctx
    if not turn.reaches(action.name):
        audit.record(
            "action.refused",
            "outside_toolsets",
            tenant_id=ctx.tenant.id,
            user_id=ctx.user.id,
            detail=action.name,
            channel=ctx.channel,
        )
        return f"Refused: {action.name} is not in this credential's toolsets. Nothing was shown or done."
    missing = missing_fields(action.Input, arguments)
    if missing:
        return _ask_or_refuse(turn, action, arguments, missing, tool_call_id)
    try:
        input = action.Input.model_validate(arguments)
    except ValidationError as exc:
        raise BadArguments(_errors(exc)) from None
    try:
        allowed = action().authorize(ctx, input)
    except (CountersignError, PermissionError):
        allowed = False
    if not allowed:
        audit.record(
            "action.refused", "refused", tenant_id=ctx.tenant.id, user_id=ctx.user.id, detail=action.name, channel=ctx.channel
        )
        return "Refused: the person may not do this. Nothing was shown or done."
    if not action.needs_card(input):
        return _handled(action, ctx, input)
    try:
        approval = approvals.create(ctx, turn.run, action, input, tool_call_id=tool_call_id, step=turn.step)
    except NotFound as exc:
        return f"Refused: {exc.message} Nothing was shown or done."
    except TooManyPending:
        return "Refused: too many requests already wait for the person's answer. Nothing was shown."
    turn.created.append(approval)
    raise Paused(approval)


def _handled(action: type[Action], ctx: ActionContext, input: BaseModel) -> str:
    """A read's or a write's handle(), run now: what it says, or its failure in short."""
    try:
        result = action().handle(ctx, input)
    except NotFound as exc:
        return f"Refused: {exc.message}"
    except CountersignError as exc:
        return f"Failed: {exc.message}"
    except DATABASE_AWAY:  # not the action's failure: the pass fails (Retry), a call is a 503
        raise
    except Exception as exc:  # the action's own failure: the model hears it in short
        log.exception("handle() of %s failed", action.name)
        return f"Failed: {short(exc)}"
    return "Done." if result is None else str(result)


def _ask_or_refuse(turn: Turn, action: type[Action], arguments: dict[str, Any], missing: list[str], tool_call_id: str) -> str:
    """A READ/WRITE action that may ask gets a form; anything else is refused, naming the fields.
    A form never asks for a secret, and never for a call that needs a card (needs_card() decides)."""
    if action.kind.needs_card or not action.ask_for_missing or needs_card_with(action, arguments):
        return f"Refused: {action.name} needs {', '.join(missing)}. Nothing was done."
    secret = [name for name in missing if name in secret_fields(action.Input)]
    if secret:
        return (
            f"Refused: {action.name} needs {', '.join(secret)}, which is a secret; a form never asks for one. Nothing was done."
        )
    try:
        approval = approvals.create_form(turn.ctx, turn.run, action, arguments, tool_call_id=tool_call_id, step=turn.step)
    except TooManyPending:
        return "Refused: too many requests already wait for the person's answer. Nothing was shown."
    except FormNeedsCard:
        return (
            f"Refused: {action.name} needs {', '.join(missing)}, and every choice left would need a card, "
            "which a form never gives. Nothing was done."
        )
    turn.created.append(approval)
    raise Paused(approval)


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())


def context_for(user: User, channel: str) -> ActionContext:
    return ActionContext(user=user, tenant=user.tenant, db=db.session, channel=channel)


def call_direct(actor: Actor, action_name: str, arguments: dict[str, Any]) -> tuple[str, Approval | None]:
    """A client that is its own agent (MCP) calls one action: the same validation, authorize,
    forms and cards as the agent loop, within the credential's toolsets; (what to answer, the
    approval it now waits on, if any). The call is a Run of status 'external' in the person's
    conversation for that channel, remembering the credential."""
    user, channel = actor.user, actor.channel
    allowed = engine().reachable(actor.toolsets)
    action = engine().registry.get(action_name)
    if action is None or action.name not in allowed:
        return f"Unknown tool {action_name!r}.", None
    conversation = for_channel(user, channel, title=f"{channel} client")
    run = Run(
        conversation_id=conversation.id,
        status=RunStatus.EXTERNAL,
        via=actor.credential,
        agent=actor.agent,
        toolsets=runs.joined(actor.toolsets),
    )
    db.session.add(run)
    db.session.flush()
    turn = Turn(ctx=context_for(user, channel), run=run, registry=engine().registry, step=1, allowed=allowed)
    try:
        said = call_action(turn, action, dict(arguments), f"{channel}-{run.id}")
    except Paused as paused:
        db.session.commit()
        cards_asked([paused.approval.id])
        return "", paused.approval
    except BadArguments as exc:
        db.session.rollback()
        return f"Invalid arguments: {exc}", None
    run.status = RunStatus.DONE
    db.session.commit()
    return said, None


def tell(kind: str, *args: Any) -> None:
    """Tell the app's listeners of `kind` (turns.listen_cards, listen_countersign, listen_decided):
    a listener that fails is logged, and never undoes what it is told of."""
    for listener in list(current_app.extensions.get(f"turns.{kind}_listeners", ())):
        try:
            listener(*args)
        except Exception:
            log.exception("a %s listener failed for %s", kind, args)


def cards_asked(approval_ids: list[str]) -> None:
    """Cards just asked for and committed, by a pass or by a client's own call (the chat connectors
    send them to the person's linked channels)."""
    tell("card", approval_ids)
