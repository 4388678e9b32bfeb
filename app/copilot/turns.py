"""The execution side of turns: one pass of a run, in a worker. Every database touch is a short
transaction of its own (never open across a model call); the model's words stream to the
conversation's events as they come; the pass ends done, paused on its cards, failed, or stopped,
and only then are its messages written (the worker alone writes them)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from flask import Flask
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.usage import UsageLimits
from redis.exceptions import RedisError

from app.copilot import events, loop, runs
from app.copilot.agent import Turn, context_for, engine
from app.extensions import db, redis_client, won
from app.models import Approval, Conversation, Message, Run, User
from app.status import FINAL, RunStatus, model_line

log = logging.getLogger(__name__)

WAITING = "Waiting for the person's answer on a card. It has not run."
NOT_RUN = "Not run: the person stopped the turn before this call ran."
UPDATE = "Update from Countersign on calls you made earlier (not the person's words): "
TEXT_EVERY = 0.05  # seconds: words arriving faster than this go out together


class Stopped(Exception):
    """The person asked this pass to stop."""


@dataclass
class Pass:
    """What one pass of a run reads, loaded in a short transaction before the model is called."""

    run: Run
    user: User
    history: list[ModelMessage]
    prompt: str | None = None
    results: DeferredToolResults | None = None
    step: int = 0
    texts: list[str] = field(default_factory=list)  # what the model said in this pass, in order
    progressed: bool = False  # tools ran, and the history they reached is saved


async def execute(app: Flask, run_id: int) -> None:
    """The job: claim the run's pass, run it, end it; then queue the conversation's next pass."""
    with app.app_context():
        # Loaded values stay readable after each commit: reading an expired one would open a
        # transaction that holds a pooled connection across the model's await (and with many turns
        # on one loop, stalls them all waiting for the pool).
        db.session().expire_on_commit = False
        try:
            run = runs.claim(run_id)
            if run is None:
                return
            conversation_id = run.conversation_id
            beat = asyncio.create_task(_heartbeat(run.id, app.config["TURN_HEARTBEAT"]))
            try:
                await _run(run)
            finally:
                beat.cancel()
                _forget_alive(run.id)
            runs.queue_next(conversation_id)
        finally:
            db.session.remove()


def _load(history: str) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_json(history or "[]"))


def _dump(messages: list[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


def _unanswered(history: list[ModelMessage]) -> list[ToolCallPart]:
    """The tool calls of the last response that nothing has answered yet (cards still waiting;
    calls of the same step that ran are answered in the request after it)."""
    last = next((i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], ModelResponse)), None)
    if last is None:
        return []
    answered = {
        p.tool_call_id
        for m in history[last + 1 :]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    }
    return [p for p in history[last].parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered]


def _answer_open_calls(history: list[ModelMessage], parts: list[ToolReturnPart]) -> None:
    """Add returns for open calls to the request after them (made when there is none)."""
    if history and isinstance(history[-1], ModelRequest):
        history[-1] = dataclasses.replace(history[-1], parts=[*history[-1].parts, *parts])
    else:
        history.append(ModelRequest(parts=parts))


def _prepare(run: Run) -> Pass:
    """Read what the pass needs, in one short transaction, and end it."""
    conversation = db.session.get(Conversation, run.conversation_id)
    assert conversation is not None
    user = conversation.user
    history = _load(conversation.history)
    work = Pass(run=run, user=user, history=history, step=run.step + 1)
    calls = _unanswered(history)
    if run.next == "results":
        step = runs.step_approvals(run)
        lines = {a.tool_call_id: model_line(a) for a in step}
        if calls and {c.tool_call_id for c in calls} <= set(lines):
            work.results = DeferredToolResults(calls={c.tool_call_id: lines[c.tool_call_id] for c in calls})
        else:  # the conversation moved on while the cards waited: tell the model as news
            work.prompt = UPDATE + " ".join(f"{a.action} ({a.tool_call_id}): {lines[a.tool_call_id]}" for a in step)
    elif run.next == "prompt":
        said = db.session.get(Message, run.message_id) if run.message_id else None
        work.prompt = said.text if said is not None else ""
    if work.prompt is not None and calls:
        _answer_open_calls(work.history, _answers_for(run.conversation_id, calls))
    _ = user.tenant  # loaded now, used by the actions' context later
    db.session.commit()
    return work


def _answers_for(conversation_id: int, calls: list[ToolCallPart]) -> list[ToolReturnPart]:
    """What the model reads for calls still open when the person writes again: a card's state
    (a model may reuse call ids: the conversation's newest approval with the id is the one)."""
    ids = [c.tool_call_id for c in calls]
    known = {
        a.tool_call_id: a
        for a in db.session.scalars(
            sa.select(Approval)
            .where(Approval.conversation_id == conversation_id, Approval.tool_call_id.in_(ids))
            .order_by(Approval.created_at)
        )
    }
    parts = []
    for call in calls:
        approval = known.get(call.tool_call_id)
        if approval is None:
            line = NOT_RUN
        elif approval.status in FINAL:
            line = model_line(approval)
        else:
            line = WAITING
        parts.append(ToolReturnPart(tool_name=call.tool_name, content=line, tool_call_id=call.tool_call_id))
    return parts


async def _run(run: Run) -> None:
    eng = engine()
    work = _prepare(run)
    conversation_id = run.conversation_id
    turn = Turn(
        ctx=context_for(work.user, run.channel or "web"),
        run=run,
        registry=eng.registry,
        step=work.step,
        allowed=eng.reachable(runs.split_toolsets(run.toolsets)),
    )
    events.publish(conversation_id, "turn", run=run.id, step=work.step, state="started", answers=runs.answers(run, work.step))
    started = time.perf_counter()
    model = loop.model(eng)
    streams = not isinstance(model, FunctionModel) or model.stream_function is not None
    text = _Words(conversation_id, run.id, work.step)
    try:
        async with loop.agent(eng).iter(
            work.prompt,
            message_history=work.history,
            deferred_tool_results=work.results,
            deps=turn,
            model=model,
            usage_limits=UsageLimits(request_limit=eng.max_steps),
        ) as agent_run:
            async for node in agent_run:
                if runs.stop_requested(run.id):
                    raise Stopped
                if Agent.is_model_request_node(node):
                    if any(isinstance(p, ToolReturnPart) for p in node.request.parts):
                        _save_progress(work, [*agent_run.all_messages(), node.request])
                    if streams:
                        await _stream(node, agent_run, text, run.id)
                elif Agent.is_call_tools_node(node):
                    said = _text_of(node.model_response)
                    if said:
                        work.texts.append(said)
                        if not streams:
                            text.new_response()
                            text.add(said)
                    text.flush()
            result = agent_run.result
            assert result is not None
    except Stopped:
        _end_stopped(work, agent_run.all_messages(), text, started)
        return
    except Exception as exc:  # the model or an action broke mid-pass: end it failed, say so
        if not isinstance(exc, UsageLimitExceeded | ModelAPIError | UnexpectedModelBehavior):
            log.exception("pass of run %s raised", run.id)
        _end_failed(work, exc, started)
        return
    _end_finished(work, turn, result, started)


async def _stream(node: Any, agent_run: Any, text: _Words, run_id: int) -> None:
    """The model's words as they are generated; a stop asked for meanwhile cuts the stream at
    the next words (one EXISTS on Redis per piece)."""
    text.new_response()
    async with node.stream(agent_run.ctx) as stream:
        async for event in stream:
            piece = ""
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                piece = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                piece = event.delta.content_delta
            if piece:
                if runs.stop_requested(run_id):  # no word after the stop
                    text.flush()
                    raise Stopped
                text.add(piece)


class _Words:
    """The streamed text of one pass: a piece goes out at once unless one went out less than
    TEXT_EVERY ago; then it goes with the others when that time is up (never held longer)."""

    def __init__(self, conversation_id: int, run_id: int, step: int) -> None:
        self.conversation_id, self.run_id, self.step = conversation_id, run_id, step
        self.buffer: list[str] = []
        self.sent_at = 0.0
        self.shown = ""
        self.fresh = False
        self.later: asyncio.TimerHandle | None = None

    def new_response(self) -> None:
        """The model starts another response in this pass: it reads as a new paragraph."""
        self.fresh = bool(self.shown or self.buffer)

    def add(self, piece: str) -> None:
        if self.fresh:
            self.buffer.append("\n\n")
            self.fresh = False
        self.buffer.append(piece)
        wait = self.sent_at + TEXT_EVERY - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self.later is None:
            self.later = asyncio.get_running_loop().call_later(wait, self.flush)

    def flush(self) -> None:
        if self.later is not None:
            self.later.cancel()
            self.later = None
        if not self.buffer:
            return
        piece = "".join(self.buffer)
        self.buffer.clear()
        self.shown += piece
        self.sent_at = time.monotonic()
        events.publish(self.conversation_id, "text", run=self.run_id, step=self.step, text=piece)


def _text_of(response: ModelResponse) -> str:
    return "".join(p.content for p in response.parts if isinstance(p, TextPart)).strip()


def _save_progress(work: Pass, messages: list[ModelMessage]) -> None:
    """Tools ran: keep the history they reached, so a failure, a stop or a dead worker never
    makes the model forget (or redo) what ran. One short transaction."""
    if not _still_running(work.run.id):
        db.session.commit()  # (ends the read: nothing is held while the model thinks)
        return
    db.session.execute(sa.update(Conversation).where(Conversation.id == work.run.conversation_id).values(history=_dump(messages)))
    db.session.execute(sa.update(Run).where(Run.id == work.run.id).values(next="continue"))
    db.session.commit()
    work.progressed = True


def _still_running(run_id: int) -> bool:
    status = db.session.scalar(sa.select(Run.status).where(Run.id == run_id))
    return status == RunStatus.RUNNING


def _end(work: Pass, status: str, added: list[Message], **values: Any) -> None:
    """Write the pass's end and its messages in one transaction, if it is still this worker's;
    then publish the turn's end."""
    run = work.run
    if not won(sa.update(Run).where(Run.id == run.id, Run.status == RunStatus.RUNNING).values(status=status, **values)):
        db.session.rollback()
        log.warning("run %s ended elsewhere (interrupted?); its pass's end is dropped", run.id)
        return
    for message in added:
        message.run_id, message.step = run.id, work.step
    db.session.add_all(added)
    db.session.commit()
    events.publish(
        run.conversation_id,
        "turn",
        run=run.id,
        step=work.step,
        state=status,
        messages=[m.id for m in added],
        answers=runs.answers(run, work.step),
    )
    for listener in list(runs.LISTENERS):
        try:
            listener(run.conversation_id, added)
        except Exception:
            log.exception("a turn listener failed for run %s", run.id)


def _usage(run: Run, usage: Any, started: float) -> dict[str, Any]:
    return {
        "requests": (run.requests or 0) + usage.requests,
        "input_tokens": (run.input_tokens or 0) + (usage.input_tokens or 0),
        "output_tokens": (run.output_tokens or 0) + (usage.output_tokens or 0),
        "duration_ms": (run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    }


def _end_finished(work: Pass, turn: Turn, result: Any, started: float) -> None:
    """Done, or paused on the cards it asked for: the conversation's history moves on."""
    run = work.run
    history = _dump(result.all_messages())
    conversation_id = run.conversation_id
    said = "\n\n".join(work.texts) or (str(result.output) if not isinstance(result.output, DeferredToolRequests) else "")
    added = [Message(conversation_id=conversation_id, role="assistant", text=said)] if said else []
    if isinstance(result.output, DeferredToolRequests):
        status = RunStatus.PAUSED
        added += [Message(conversation_id=conversation_id, role="card", approval_id=a.id) for a in turn.created]
    else:
        status = RunStatus.DONE
    if not _still_running(run.id):
        db.session.rollback()
        return
    db.session.execute(sa.update(Conversation).where(Conversation.id == conversation_id).values(history=history))
    _end(work, status, added, history=history, step=work.step, next="results", **_usage(run, result.usage, started))


def _end_stopped(work: Pass, messages: list[ModelMessage], text: _Words, started: float) -> None:
    """Stopped at a step: the history keeps what ran (calls it had not run are answered as not
    run), the words shown so far are kept, and a notice says what ran."""
    text.flush()
    history = list(messages)
    calls = _unanswered(history)
    if calls:
        _answer_open_calls(
            history, [ToolReturnPart(tool_name=c.tool_name, content=NOT_RUN, tool_call_id=c.tool_call_id) for c in calls]
        )
    ran = _ran_in_pass(work, history)
    conversation_id = work.run.conversation_id
    added = []
    if text.shown.strip():
        added.append(Message(conversation_id=conversation_id, role="assistant", text=text.shown.strip()))
    added.append(
        Message(
            conversation_id=conversation_id,
            role="notice",
            text="Stopped. " + (f"Before it stopped: {'; '.join(ran)}." if ran else "Nothing ran."),
        )
    )
    if not _still_running(work.run.id):
        db.session.rollback()
        return
    if len(history) > len(work.history) or work.progressed:
        db.session.execute(sa.update(Conversation).where(Conversation.id == conversation_id).values(history=_dump(history)))
    _end(
        work,
        RunStatus.STOPPED,
        added,
        step=work.step,
        next="continue",
        duration_ms=(work.run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    )
    try:
        redis_client.client.delete(runs.stop_key(work.run.id))
    except RedisError:
        pass


def _ran_in_pass(work: Pass, history: list[ModelMessage]) -> list[str]:
    """What the actions said in this pass (their own result lines), oldest first."""
    lines = []
    for message in history[len(work.history) :]:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.content not in (NOT_RUN, WAITING):
                    lines.append(f"{part.tool_name}: {part.content}")
    return lines


def _end_failed(work: Pass, exc: Exception, started: float) -> None:
    """The model failed: what ran stays (its history is saved), the person's message is kept,
    and a notice with Retry says so plainly. Retry runs this same pass again."""
    log.warning("pass of run %s failed: %s: %s", work.run.id, type(exc).__name__, exc)
    db.session.rollback()
    notice = Message(conversation_id=work.run.conversation_id, role="error", text=failure_message(exc))
    _end(
        work,
        RunStatus.FAILED,
        [notice],
        error=f"{type(exc).__name__}: {exc}"[:1000],
        duration_ms=(work.run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    )


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
        said = (
            "The model did not answer in time."
            if "timeout" in cause or "timed out" in cause
            else "The model's service could not be reached."
        )
    elif isinstance(exc, UnexpectedModelBehavior):
        said = "The model sent an answer that could not be used."
    else:
        said = "The assistant could not finish this turn."
    return f"{said} Your message is saved; press Retry to try again."


async def _heartbeat(run_id: int, every: float) -> None:
    """While the pass runs, say so (runs.sweep_dead ends a pass whose worker stopped saying so)."""
    while True:
        try:
            redis_client.client.set(runs.alive_key(run_id), "1", ex=int(every * 3) + 1)
        except RedisError:
            pass
        await asyncio.sleep(every)


def _forget_alive(run_id: int) -> None:
    try:
        redis_client.client.delete(runs.alive_key(run_id))
    except RedisError:
        pass


def keep_alive(app: Flask, done: Any) -> None:
    """The worker's housekeeping until `done`: passes whose worker died become interrupted."""
    while not done.wait(app.config["TURN_HEARTBEAT"]):
        with app.app_context():
            try:
                runs.sweep_dead(app.config["TURN_DEAD_AFTER"])
            except Exception:
                log.exception("sweep of dead passes failed")
            finally:
                db.session.remove()
