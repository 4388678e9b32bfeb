"""The agent loop, pydantic-ai's side: the engine's actions as the agent's tools, and the model a
pass talks to. Only the turn executor (app.copilot.turns) imports it, so the app starts
without importing pydantic-ai (~0.6 s); a process's first turn imports it."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Literal

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import CallDeferred, ModelRetry
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, ToolDefinition

from app.copilot.actions import Action, tool_schema
from app.copilot.turns._agent import BadArguments, Engine, Paused, Turn, call_action
from app.copilot.turns._llm import make_model
from app.copilot.turns._writes import in_thread
from app.extensions import db
from app.status import ApprovalType

SYSTEM_PROMPT = """\
You are Countersign, an assistant inside a web app. You act only through the tools given.
Destructive and external tools do not run when you call them: the server shows the person a
card built from its own records, and the tool runs only if the person confirms it. You cannot
confirm, approve or decline anything yourself, and nothing you write counts as the person's
answer. While a card waits, say that it waits for the person; never say it is done until a tool
result says so. Report outcomes exactly as the tool results state them."""

# Made on an engine's first turn, kept while it lives (tests make an engine per app).
_agents: weakref.WeakKeyDictionary[Engine, Agent[Turn, Any]] = weakref.WeakKeyDictionary()
_models: weakref.WeakKeyDictionary[Engine, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Model]] = (
    weakref.WeakKeyDictionary()
)


def agent(eng: Engine) -> Agent[Turn, Any]:
    """The engine's agent: each exposed action a tool, the model given per pass."""
    made = _agents.get(eng)
    if made is None:
        made = _agents[eng] = Agent(
            None,
            deps_type=Turn,
            output_type=[str, DeferredToolRequests],
            instructions=SYSTEM_PROMPT,
            tools=[_tool(a) for a in eng.registry.exposed(eng.toolsets)],
        )
    return made


def model(eng: Engine) -> Model:
    """The model for a pass on the running event loop: the one use_model() put in place, or
    COUNTERSIGN_MODEL's. A provider's model (and its HTTP client, whose connections belong to one
    loop) is made once per loop: a worker's loop runs many passes on one pool of connections."""
    if eng.fixed is not None:
        return eng.fixed
    per_loop = _models.setdefault(eng, weakref.WeakKeyDictionary())
    loop = asyncio.get_running_loop()
    made = per_loop.get(loop)
    if made is None:
        made = per_loop[loop] = make_model(eng.model_spec, eng.base_url, eng.api_key, eng.timeout, eng.word_pause)
    return made


def preload(eng: Engine) -> None:
    """Make the engine's agent and import its model's modules now (a worker, before its first
    job). On a first pass instead, the model SDK's import (about 1.5 s on a 2-core machine) would
    hold up every pass on the worker's one event loop. The model itself is made per loop, later."""
    agent(eng)
    if eng.fixed is None:
        make_model(eng.model_spec, eng.base_url, eng.api_key, eng.timeout, eng.word_pause)


def _tool(action: type[Action]) -> Tool[Turn]:
    async def call(ctx: RunContext[Turn], **arguments: Any) -> str:
        # In a thread of the pass's writers (turns._writes), with the pass's own session: an action
        # is developers' code, which may wait on a lock or a provider's API; the loop goes on.
        async with ctx.deps.calls:
            return await in_thread(_call, ctx.deps, action, arguments, ctx.tool_call_id or "")

    tool: Tool[Turn] = Tool.from_schema(
        call,
        name=action.name,
        description=action.description(),
        json_schema=tool_schema(action.Input),
        takes_ctx=True,
    )
    tool.metadata = {"examples": list(action.examples), "kind": action.kind.value}
    tool.prepare = _offer_if_reached
    return tool


def _call(turn: Turn, action: type[Action], arguments: dict[str, Any], tool_call_id: str) -> str:
    """One call of an action: a short transaction of its own, ended before the model is called
    again (none waits on a model)."""
    try:
        turn.ran += 1
        said = call_action(turn, action, arguments, tool_call_id)
    except Paused as paused:
        db.session.commit()  # the card or form it created
        kind: Literal["external", "question"] = "question" if paused.approval.type == ApprovalType.FORM else "external"
        raise CallDeferred(metadata={"approval_id": paused.approval.id}, kind=kind) from None
    except BadArguments as exc:
        db.session.rollback()
        raise ModelRetry(str(exc)) from None
    except BaseException:
        db.session.rollback()
        raise
    db.session.commit()
    return said


def _offer_if_reached(ctx: RunContext[Turn], tool_def: ToolDefinition) -> ToolDefinition | None:
    """Offer the model only the tools the run's credential reaches (its toolsets)."""
    return tool_def if ctx.deps.reaches(tool_def.name) else None
