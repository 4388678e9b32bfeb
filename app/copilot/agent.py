"""The agent loop: the model calls actions; cards pause the run, which is saved and
resumed with the people's answers. Nothing is held in memory between requests."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from flask import current_app
from pydantic import ValidationError
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import (
    AgentRunError,
    CallDeferred,
    ModelAPIError,
    ModelHTTPError,
    ModelRetry,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDefinition
from pydantic_ai.usage import UsageLimits

from app.copilot import approvals, audit
from app.copilot.actions import Action, ActionContext, Registry, needs_card_with
from app.copilot.llm import make_model
from app.copilot.schema import missing_fields, secret_fields, tool_schema
from app.errors import CountersignError, Expired, FormNeedsCard, NotFound, TooManyPending
from app.extensions import db
from app.models import Approval, Conversation, Message, Run, User

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You are Countersign, an assistant inside a web app. You act only through the tools given.
Destructive and external tools do not run when you call them: the server shows the person a
card built from its own records, and the tool runs only if the person confirms it. You cannot
confirm, approve or decline anything yourself, and nothing you write counts as the person's
answer. While a card waits, say that it waits for the person; never say it is done until a tool
result says so. Report outcomes exactly as the tool results state them."""

WAITING = "Waiting for the person's answer on a card. It has not run."


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

    def reaches(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed


def narrow(*toolsets: Sequence[str] | None) -> tuple[str, ...] | None:
    """The toolsets every one of these allows (None allows all): a run never reaches more than
    any credential or conversation it comes from."""
    out: set[str] | None = None
    for names in toolsets:
        if names is not None:
            out = set(names) if out is None else out & set(names)
    return None if out is None else tuple(sorted(out))


def split_toolsets(stored: str | None) -> tuple[str, ...] | None:
    """A stored comma list as toolsets; NULL means the app's (no limit of its own)."""
    return None if stored is None else tuple(t for t in stored.split(",") if t)


class Engine:
    """The registry, the model and the agent built from them, per app."""

    def __init__(self, registry: Registry, model_spec: str, base_url: str | None, toolsets: list[str],
                 max_steps: int, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.registry = registry
        self.model_spec = model_spec
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.toolsets = toolsets
        self.max_steps = max_steps
        self._fixed: Model | None = make_model("offline") if model_spec == "offline" else None
        if self._fixed is None:
            make_model(model_spec, base_url, api_key, timeout)  # a wrong COUNTERSIGN_MODEL fails at start
        self._agent: Agent[Turn, Any] | None = None

    def use_model(self, model: Model) -> None:
        """Swap the model (tests queue a scripted one)."""
        self._fixed = model

    def reachable(self, toolsets: Sequence[str] | None) -> frozenset[str]:
        """The names of the actions a credential limited to `toolsets` reaches (None: all the
        app's COUNTERSIGN_TOOLSETS); never more than the app's."""
        return frozenset(a.name for a in self.registry.exposed(list(narrow(self.toolsets, toolsets) or ())))

    def model(self) -> Model:
        """The model for one run. A provider's model is made per run: its HTTP client belongs to
        the event loop of that run's asyncio.run()."""
        if self._fixed is not None:
            return self._fixed
        return make_model(self.model_spec, self.base_url, self.api_key, self.timeout)

    @property
    def agent(self) -> Agent[Turn, Any]:
        if self._agent is None:
            tools = [_tool(a) for a in self.registry.exposed(self.toolsets)]
            self._agent = Agent(
                None,
                deps_type=Turn,
                output_type=[str, DeferredToolRequests],
                instructions=SYSTEM_PROMPT,
                tools=tools,
            )
        return self._agent


def engine() -> Engine:
    return current_app.extensions["countersign"]


def _tool(action: type[Action]) -> Tool[Turn]:
    async def call(ctx: RunContext[Turn], **arguments: Any) -> str:
        # async on purpose: it runs on the request's thread, where its DB session lives.
        return call_action(ctx.deps, action, arguments, ctx.tool_call_id or "")

    tool: Tool[Turn] = Tool.from_schema(
        call, name=action.name, description=action.description(),
        json_schema=tool_schema(action.Input), takes_ctx=True,
    )
    tool.metadata = {"examples": list(action.examples), "kind": action.kind.value}
    tool.prepare = _offer_if_reached
    return tool


def _offer_if_reached(ctx: RunContext[Turn], tool_def: ToolDefinition) -> ToolDefinition | None:
    """Offer the model only the tools the run's credential reaches (its toolsets)."""
    return tool_def if ctx.deps.reaches(tool_def.name) else None


def call_action(turn: Turn, action: type[Action], arguments: dict[str, Any], tool_call_id: str) -> str:
    """DESIGN §3: validate, authorize, then run now, or pause on a card. An action outside the
    credential's toolsets is refused first (the model was not offered it either)."""
    ctx = turn.ctx
    if not turn.reaches(action.name):
        audit.record("action.refused", "outside_toolsets", tenant_id=ctx.tenant.id, user_id=ctx.user.id,
                     detail=action.name, channel=ctx.channel)
        return f"Refused: {action.name} is not in this credential's toolsets. Nothing was shown or done."
    missing = missing_fields(action.Input, arguments)
    if missing:
        return _ask_or_refuse(turn, action, arguments, missing, tool_call_id)
    try:
        input = action.Input.model_validate(arguments)
    except ValidationError as exc:
        raise ModelRetry(_errors(exc)) from None
    try:
        allowed = action().authorize(ctx, input)
    except (CountersignError, PermissionError):
        allowed = False
    if not allowed:
        audit.record("action.refused", "refused", tenant_id=ctx.tenant.id, user_id=ctx.user.id,
                     detail=action.name, channel=ctx.channel)
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
            return f"Failed: {approvals.short(exc)}"
        return "Done." if result is None else str(result)
    try:
        approval = approvals.create(ctx, turn.run, action, input, tool_call_id=tool_call_id,
                                    step=turn.step)
    except NotFound as exc:
        return f"Refused: {exc.message} Nothing was shown or done."
    except TooManyPending:
        return "Refused: too many requests already wait for the person's answer. Nothing was shown."
    turn.created.append(approval)
    raise CallDeferred(metadata={"approval_id": approval.id})


def _ask_or_refuse(turn: Turn, action: type[Action], arguments: dict[str, Any], missing: list[str],
                   tool_call_id: str) -> str:
    """A READ/WRITE action that may ask gets a form; anything else is refused, naming the fields.
    A form never asks for a secret, and never for a call that needs a card (needs_card() decides)."""
    if action.kind.needs_card or not action.ask_for_missing or needs_card_with(action, arguments):
        return f"Refused: {action.name} needs {', '.join(missing)}. Nothing was done."
    secret = [name for name in missing if name in secret_fields(action.Input)]
    if secret:
        return (f"Refused: {action.name} needs {', '.join(secret)}, which is a secret; "
                "a form never asks for one. Nothing was done.")
    try:
        approval = approvals.create_form(turn.ctx, turn.run, action, arguments,
                                         tool_call_id=tool_call_id, step=turn.step)
    except TooManyPending:
        return "Refused: too many requests already wait for the person's answer. Nothing was shown."
    except FormNeedsCard:
        return (f"Refused: {action.name} needs {', '.join(missing)}, and every choice left would need a card, "
                "which a form never gives. Nothing was done.")
    turn.created.append(approval)
    raise CallDeferred(metadata={"approval_id": approval.id}, kind="question")


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())


def _load(history: str) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_json(history or "[]"))


def _dump(messages: list[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


def context_for(user: User, channel: str) -> ActionContext:
    return ActionContext(user=user, tenant=user.tenant, db=db.session, channel=channel)


def _person(user: User, channel: str) -> approvals.Actor:
    """The person themself on a channel (the browser, a verified chat thread): no limit of its own."""
    return approvals.Actor(user=user, binding=channel, channel=channel)


def send_message(conversation: Conversation, user: User, text: str, channel: str = "web",
                 actor: approvals.Actor | None = None) -> list[Message]:
    """The person says something: save it, run the agent, return the messages it added. `actor`
    is the credential it came through (an API token's scope and toolsets bind the run)."""
    first = Message(conversation_id=conversation.id, role="user", text=text)
    db.session.add(first)
    if conversation.title == "New conversation":
        conversation.title = text.strip()[:60] or conversation.title
    db.session.commit()  # the person's words are kept whatever the model does next
    return [first, *_turn(conversation, actor or _person(user, channel), text)]


def retry(conversation: Conversation, user: User, channel: str = "web",
          actor: approvals.Actor | None = None) -> list[Message]:
    """Run the last turn again after the model failed, with the person's saved message, bound
    by the credential that asks for the retry."""
    last = db.session.scalar(
        sa.select(Message).where(Message.conversation_id == conversation.id).order_by(Message.id.desc()).limit(1)
    )
    if last is None or last.role != "error":
        return []
    asked = db.session.scalar(
        sa.select(Message.text).where(Message.conversation_id == conversation.id, Message.role == "user")
        .order_by(Message.id.desc()).limit(1)
    )
    if asked is None:
        return []
    last.role = "notice"  # the failed turn's note stays, without its Retry button
    db.session.commit()
    return _turn(conversation, actor or _person(user, channel), asked)


def _conversation_toolsets(conversation_id: int) -> tuple[str, ...] | None:
    """The toolsets the conversation's latest run was limited to (None: none of its own)."""
    stored = db.session.scalar(
        sa.select(Run.toolsets).where(Run.conversation_id == conversation_id).order_by(Run.id.desc()).limit(1)
    )
    return split_toolsets(stored)


def _joined(toolsets: tuple[str, ...] | None) -> str | None:
    return None if toolsets is None else ",".join(toolsets)


def _turn(conversation: Conversation, actor: approvals.Actor, text: str) -> list[Message]:
    """Run the agent on the person's text, after whatever the model already remembers. The run
    reaches what both the credential and the conversation's last run reach: a conversation an
    agent token started stays within that token's toolsets, also when the person writes in it."""
    paused = db.session.scalar(
        sa.select(Run).where(Run.conversation_id == conversation.id, Run.status == "paused")
        .order_by(Run.id.desc()).limit(1)
    )
    if paused is not None:
        # The paused run's calls are unanswered; the model sees them as waiting.
        history = _load(paused.history)
        waiting = [ToolReturnPart(tool_name=a.action, content=WAITING, tool_call_id=a.tool_call_id)
                   for a in _step_approvals(paused)]
        history.append(ModelRequest(parts=[*waiting, UserPromptPart(text)]))
        prompt: str | None = None
    else:
        history = _load(conversation.history)
        prompt = text
    toolsets = narrow(actor.toolsets, _conversation_toolsets(conversation.id))
    run = Run(conversation_id=conversation.id, status="running", via=actor.credential, agent=actor.agent,
              toolsets=_joined(toolsets))
    db.session.add(run)
    db.session.flush()
    return _drive(run, actor.user, actor.channel, history, prompt=prompt)


def _step_approvals(run: Run) -> list[Approval]:
    return list(db.session.scalars(
        sa.select(Approval).where(Approval.run_id == run.id, Approval.step == run.step)
        .order_by(Approval.created_at)
    ))


def _drive(run: Run, user: User, channel: str, history: list[ModelMessage], *,
           prompt: str | None = None, results: DeferredToolResults | None = None) -> list[Message]:
    """One pass of the agent until it answers or pauses; saves the run either way. The run's own
    toolsets bind it, whoever's answer resumed it."""
    eng = engine()
    turn = Turn(ctx=context_for(user, channel), run=run, registry=eng.registry, step=run.step + 1,
                allowed=eng.reachable(split_toolsets(run.toolsets)))
    conversation_id = run.conversation_id
    started = time.perf_counter()
    try:
        result = asyncio.run(eng.agent.run(
            prompt, message_history=history, deferred_tool_results=results, deps=turn,
            model=eng.model(), usage_limits=UsageLimits(request_limit=eng.max_steps),
        ))
    except (AgentRunError, UsageLimitExceeded) as exc:
        return _fail(run, conversation_id, exc, started)
    except Exception as exc:  # a provider or an action broke mid-turn: undo the turn, say so
        log.exception("agent run %s raised", run.id)
        return _fail(run, conversation_id, exc, started)

    usage = result.usage
    run.requests = (run.requests or 0) + usage.requests
    run.input_tokens = (run.input_tokens or 0) + (usage.input_tokens or 0)
    run.output_tokens = (run.output_tokens or 0) + (usage.output_tokens or 0)
    run.duration_ms = (run.duration_ms or 0) + int((time.perf_counter() - started) * 1000)
    run.history = _dump(result.all_messages())
    run.step = turn.step
    added: list[Message] = []
    said = _last_text(result.new_messages())
    if isinstance(result.output, DeferredToolRequests):
        run.status = "paused"
        if said:
            added.append(Message(conversation_id=conversation_id, role="assistant", text=said))
        for approval in turn.created:
            added.append(Message(conversation_id=conversation_id, role="card", approval_id=approval.id))
    else:
        run.status = "done"
        conversation = db.session.get(Conversation, conversation_id)
        assert conversation is not None
        conversation.history = run.history
        added.append(Message(conversation_id=conversation_id, role="assistant", text=str(result.output)))
    db.session.add_all(added)
    db.session.commit()
    return added


def _last_text(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return "\n".join(p.content for p in message.parts if isinstance(p, TextPart)).strip()
    return ""


def _fail(run: Run, conversation_id: int, exc: Exception, started: float) -> list[Message]:
    """The model failed: undo the half-done turn, keep the person's message, say so plainly."""
    log.warning("agent run %s failed: %s: %s", run.id, type(exc).__name__, exc)
    bound = {"via": run.via, "agent": run.agent, "toolsets": run.toolsets}  # the retry stays within them
    db.session.rollback()
    failed = Run(conversation_id=conversation_id, status="failed", error=f"{type(exc).__name__}: {exc}"[:1000],
                 duration_ms=int((time.perf_counter() - started) * 1000), **bound)
    db.session.add(failed)
    notice = Message(conversation_id=conversation_id, role="error", text=failure_message(exc))
    db.session.add(notice)
    db.session.commit()
    return [notice]


def failure_message(exc: Exception) -> str:
    """What the person reads when the model fails; the details go to the log and the run."""
    if isinstance(exc, UsageLimitExceeded):
        said = "The assistant took too many steps without finishing, so it was stopped."
    elif isinstance(exc, ModelHTTPError):
        if exc.status_code == 429:
            said = "The model is busy right now (rate limited)."
        elif exc.status_code >= 500:
            said = f"The model's service failed (HTTP {exc.status_code})."
        else:
            said = f"The model's service refused the request (HTTP {exc.status_code})."
    elif isinstance(exc, ModelAPIError):
        cause = f"{exc} {exc.__cause__!r}".lower()
        said = ("The model did not answer in time." if "timeout" in cause or "timed out" in cause
                else "The model's service could not be reached.")
    elif isinstance(exc, UnexpectedModelBehavior):
        said = "The model sent an answer that could not be used."
    else:
        said = "The assistant could not finish this turn."
    return f"{said} Your message is saved; press Retry to try again."


def resume_if_ready(run_id: int, user: User, channel: str) -> list[Message]:
    """Once every call of the run's current step is decided, continue the run (once)."""
    run = db.session.get(Run, run_id)
    if run is None or run.status != "paused":
        return []
    step = _step_approvals(run)
    if any(a.status not in approvals.FINAL for a in step):
        return []
    resumed = approvals.won(
        sa.update(Run).where(Run.id == run.id, Run.status == "paused", Run.step == run.step).values(status="running")
    )
    db.session.commit()
    if not resumed:
        return []
    db.session.refresh(run)
    results = DeferredToolResults(calls={a.tool_call_id: approvals.model_line(a) for a in step})
    return _drive(run, user, channel, _load(run.history), results=results)


def answer(approval_id: str, token: str, actor: approvals.Actor, decision: str) -> tuple[Approval, list[Message]]:
    """The person answers a card (every delivery comes here): decide, then resume the run."""
    try:
        approval = approvals.decide(approval_id, token, actor, decision, engine().registry)
    except Expired:
        _tell_expired(approval_id, actor)
        raise
    return approval, resume_if_ready(approval.run_id, actor.user, actor.channel)


def _tell_expired(approval_id: str, actor: approvals.Actor) -> None:
    """Past its time: end it as expired (if nobody has yet) and tell the model."""
    stale = db.session.get(Approval, approval_id)
    if stale is not None and stale.user_id == actor.user.id:
        approvals.expire(stale, channel=actor.channel)
        if stale.status == "expired":
            resume_if_ready(stale.run_id, stale.user, actor.channel)


def answer_form(approval_id: str, token: str, actor: approvals.Actor,
                values: Any) -> tuple[Approval, list[Message]]:
    """The person submits a form: validate, run, then resume the run."""
    try:
        approval = approvals.submit(approval_id, token, actor, values, engine().registry)
    except Expired:
        _tell_expired(approval_id, actor)
        raise
    return approval, resume_if_ready(approval.run_id, actor.user, actor.channel)


def revoke(approval_id: str, admin: User, by_agent: bool = False) -> Approval:
    """An admin revokes a pending approval; the waiting run is told. An agent credential may not."""
    approval = approvals.revoke(approval_id, admin, by_agent=by_agent)
    resume_if_ready(approval.run_id, approval.user, "admin")
    return approval


def call_direct(actor: approvals.Actor, action_name: str, arguments: dict[str, Any]) -> tuple[str, Approval | None]:
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
    conversation = db.session.scalar(sa.select(Conversation).where(
        Conversation.user_id == user.id, Conversation.title == title))
    if conversation is None:
        conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id, title=title)
        db.session.add(conversation)
        db.session.flush()
    run = Run(conversation_id=conversation.id, status="external", via=actor.credential, agent=actor.agent,
              toolsets=_joined(actor.toolsets))
    db.session.add(run)
    db.session.flush()
    turn = Turn(ctx=context_for(user, channel), run=run, registry=engine().registry, step=1, allowed=allowed)
    try:
        said = call_action(turn, action, dict(arguments), f"{channel}-{run.id}")
    except CallDeferred:
        db.session.commit()
        return "", turn.created[0]
    except ModelRetry as exc:
        db.session.rollback()
        return f"Invalid arguments: {exc}", None
    run.status = "done"
    db.session.commit()
    return said, None


def supersede(approval_id: str, channel: str) -> None:
    """A newer card replaced this one in a chat thread; the waiting run is told."""
    approval = approvals.supersede(approval_id, channel)
    if approval is not None:
        resume_if_ready(approval.run_id, approval.user, channel)


def expire_due(conversation_id: int | None = None) -> list[Approval]:
    """End every pending approval past its time and tell the waiting runs."""
    ended = []
    for approval in approvals.due_for_expiry(conversation_id):
        if approvals.expire(approval):
            ended.append(approval)
            resume_if_ready(approval.run_id, approval.user, "system")
    return ended


def sweep_interrupted(older_than_seconds: int) -> list[Approval]:
    """End approvals whose process died mid-handle() as `interrupted`, and tell the runs."""
    ended = approvals.mark_interrupted(older_than_seconds)
    for approval in ended:
        resume_if_ready(approval.run_id, approval.user, "system")
    return ended
