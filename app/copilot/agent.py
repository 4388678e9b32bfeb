"""The agent loop, the engine's side: each tool call the model makes is validated, authorized,
run or paused on a card; the saved run resumes with the people's answers. Nothing is held in
memory between requests. The pydantic-ai agent that makes the calls is app.copilot.loop's."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from flask import current_app
from pydantic import ValidationError

from app.copilot import approvals, audit, countersigning, llm, notices, runs
from app.copilot.actions import Action, ActionContext, Registry, needs_card_with
from app.copilot.approvals import short
from app.copilot.schema import missing_fields, secret_fields
from app.copilot.tokens import Actor, ChannelProof
from app.errors import CountersignError, Expired, FormNeedsCard, NotFound, TooManyPending
from app.extensions import db
from app.models import Approval, Conversation, Message, Run, User
from app.status import RunStatus, Status

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
        try:
            result = action().handle(ctx, input)
        except NotFound as exc:
            return f"Refused: {exc.message}"
        except CountersignError as exc:
            return f"Failed: {exc.message}"
        except Exception as exc:  # the action's own failure: the model hears it in short
            log.exception("handle() of %s failed", action.name)
            return f"Failed: {short(exc)}"
        return "Done." if result is None else str(result)
    try:
        approval = approvals.create(ctx, turn.run, action, input, tool_call_id=tool_call_id, step=turn.step)
    except NotFound as exc:
        return f"Refused: {exc.message} Nothing was shown or done."
    except TooManyPending:
        return "Refused: too many requests already wait for the person's answer. Nothing was shown."
    turn.created.append(approval)
    raise Paused(approval)


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


def person(user: User, channel: str) -> Actor:
    """The person themself on a channel (the browser, a verified chat thread): no limit of its own."""
    return Actor(user=user, binding=channel, channel=channel)


def send_message(conversation: Conversation, actor: Actor, text: str, submit: bool = True) -> tuple[Message, Run]:
    """The person says something through `actor` (its scope and toolsets bind the run): the
    message is kept and its turn queued; the turn runs in a worker (runs.start)."""
    return runs.start(conversation, actor, text, submit)


def answer(
    approval_id: str,
    proof: str | ChannelProof,
    actor: Actor,
    decision: str,
    values: Mapping[str, Any] | None = None,
    reason: str | None = None,
) -> Approval:
    """The person answers a card or a form (every delivery comes here, see approvals.answer):
    decide — handle() runs here when confirmed or submitted — and queue the run's continuation;
    the model's words follow on its events. An edit or a refresh returns the fresh card, which
    keeps the run waiting."""
    try:
        if decision == "decline":
            values = {"reason": reason}  # the person's words for the model (revise.answer)
        approval = approvals.answer(approval_id, proof, actor, decision, engine().registry, values)
    except Expired:
        _tell_expired(approval_id, actor)
        raise
    if approval.status == Status.COUNTERSIGNING and decision == "confirm":
        notices.queue_countersign_notice(approval)
    runs.resume_if_ready(approval.run_id)
    return approval


def countersign(approval_id: str, token: object, actor: Actor, decision: str, reason: object = None) -> Approval:
    """A second person countersigns (handle() runs here, as the person who asked) or declines a
    card waiting for its countersignature (countersigning.countersign); the run's continuation is queued."""
    try:
        approval = countersigning.countersign(approval_id, token, actor, decision, engine().registry, reason)
    except Expired:
        stale = db.session.get(Approval, approval_id)
        if stale is not None and stale.tenant_id == actor.user.tenant_id and approvals.expire(stale, channel=actor.channel):
            runs.resume_if_ready(stale.run_id)
        raise
    runs.resume_if_ready(approval.run_id)
    return approval


def _tell_expired(approval_id: str, actor: Actor) -> None:
    """Past its time: end it as expired (if nobody has yet) and tell the model."""
    stale = db.session.get(Approval, approval_id)
    if stale is not None and stale.user_id == actor.user.id:
        approvals.expire(stale, channel=actor.channel)
        if stale.status == Status.EXPIRED:
            runs.resume_if_ready(stale.run_id)


def revoke(approval_id: str, admin: User, by_agent: bool = False) -> Approval:
    """An admin revokes a pending approval; the waiting run is told. An agent credential may not."""
    approval = approvals.revoke(approval_id, admin, by_agent=by_agent)
    runs.resume_if_ready(approval.run_id)
    return approval


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
    title = f"{channel} client"
    conversation = db.session.scalar(
        sa.select(Conversation).where(
            Conversation.user_id == user.id, Conversation.title == title, Conversation.deleted_at.is_(None)
        )
    )  # (a deleted one stays deleted: the next call starts a new one)
    if conversation is None:
        conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id, title=title)
        db.session.add(conversation)
        db.session.flush()
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
        return "", paused.approval
    except BadArguments as exc:
        db.session.rollback()
        return f"Invalid arguments: {exc}", None
    run.status = RunStatus.DONE
    db.session.commit()
    return said, None


def supersede(approval_id: str, channel: str) -> None:
    """A newer card replaced this one in a chat thread; the waiting run is told."""
    approval = approvals.supersede(approval_id, channel)
    if approval is not None:
        runs.resume_if_ready(approval.run_id)


def expire_due(conversation_id: int | None = None, user_id: int | None = None) -> list[Approval]:
    """End every pending approval past its time (of a conversation, a person, or all) and tell
    the waiting runs."""
    ended = []
    for approval in approvals.due_for_expiry(conversation_id, user_id):
        if approvals.expire(approval):
            ended.append(approval)
            runs.resume_if_ready(approval.run_id)
    return ended


def sweep_interrupted(older_than_seconds: int) -> list[Approval]:
    """End approvals whose process died mid-handle() as `interrupted`, and tell the runs."""
    ended = approvals.mark_interrupted(older_than_seconds)
    for approval in ended:
        runs.resume_if_ready(approval.run_id)
    return ended
