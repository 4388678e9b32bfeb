"""The execution side of turns: one pass of a run, in a worker. Every database touch is a short
transaction of its own (never open across a model call); the model's words stream to the
conversation's events as they come; the pass ends done, paused on its cards, failed, or stopped,
and only then are its messages written (the worker alone writes them)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, current_app
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import (
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import UsageLimits
from redis.exceptions import RedisError

from app.copilot import events
from app.copilot.turns import _line as line
from app.copilot.turns import _loop as loop
from app.copilot.turns import _runs as runs
from app.copilot.turns import _sweep as sweep
from app.copilot.turns._agent import Engine, Turn, context_for, engine
from app.copilot.turns._endings import end_failed, end_finished, end_stopped, save_progress
from app.copilot.turns._history import Pass, prepare
from app.copilot.turns._writes import written
from app.extensions import db, redis_client
from app.models import Run
from app.status import EventType, TurnState

log = logging.getLogger(__name__)


class Stopped(Exception):
    """The person asked this pass to stop."""


async def execute(app: Flask, run_id: int, claimed: line.Claimed | None = None) -> None:
    """The job: claim the run's pass (or take it `claimed` as it was written: runs.start's
    `claim`), run it, end it; then queue the conversation's next pass."""
    with app.app_context():
        # Loaded values stay readable after each commit: reading an expired one would open a
        # transaction that holds a pooled connection across the model's await (and with many turns
        # on one loop, stalls them all waiting for the pool).
        db.session().expire_on_commit = False
        try:
            if claimed is None:
                adopted, run = None, await written(line.claim, run_id)
            else:
                adopted = line.adopt(claimed)
                run = adopted.run if adopted is not None else None
            if run is None:
                return
            conversation_id = run.conversation_id
            beat = asyncio.create_task(_heartbeat(run.id, app.config["TURN_HEARTBEAT"]))
            forgotten = False
            try:
                forgotten = await _run(run, adopted)
            finally:
                beat.cancel()
                if not forgotten:  # (a pass's published end forgets its heartbeat in the same step)
                    _forget_alive(run.id)
            line.queue_next(conversation_id)
        finally:
            db.session.remove()


async def _run(run: Run, adopted: line.Adopted | None) -> bool:
    """One pass: stream the model's words, run its tool calls, end it done, paused, stopped or
    failed. True when its end was published (which also forgot its heartbeat and stop request).
    `adopted`: the person and the history, when its claim brought them (else read now)."""
    eng = engine()
    work = prepare(run, adopted)
    turn = Turn(
        ctx=context_for(work.user, run.channel or "web"),
        run=run,
        registry=eng.registry,
        step=work.step,
        allowed=eng.reachable(runs.split_toolsets(run.toolsets)),
    )
    started = time.perf_counter()
    config = current_app.config
    text = _Words(run.conversation_id, run.id, work.step, config["EVENTS_TEXT_EVERY_MS"] / 1000, config["EVENTS_TEXT_PER_SECOND"])
    held: list[Any] = []  # the agent's run, once it started
    try:
        # One round trip: the start is told (unless a stop was asked for since the claim: then
        # nothing runs) and the heartbeat's first "still here" is said.
        events.publish(
            run.conversation_id,
            EventType.TURN,
            unless=runs.stop_key(run.id),
            alive=(runs.alive_key(run.id), runs.alive_for(config["TURN_HEARTBEAT"])),
            run=run.id,
            step=work.step,
            state=TurnState.STARTED,
            answers=runs.answers(run, work.step),
        )
        with streaming(), text:  # (leaving, it drops what it still holds: nothing follows the end)
            result = await _iterate(eng, work, turn, text, held)
    except (Stopped, events.Refused):
        messages = held[0].all_messages() if held else list(work.history)
        return await written(end_stopped, work, messages, text, started)
    except Exception as exc:  # the model or an action broke mid-pass: end it failed, say so
        if not isinstance(exc, UsageLimitExceeded | ModelAPIError | UnexpectedModelBehavior):
            log.exception("pass of run %s raised", run.id)
        return await written(end_failed, work, exc, started)
    return await written(end_finished, work, turn, result, started)


async def _iterate(eng: Engine, work: Pass, turn: Turn, text: _Words, held: list[Any]) -> Any:
    """The agent's nodes, one by one: a stop asked for ends it at the next; the history is saved
    after each step that ran tools; the words go out as they come. `held` gets the agent's run
    (a stop reads the history it reached)."""
    model = loop.model(eng)
    streams = not isinstance(model, FunctionModel) or model.stream_function is not None
    limits = UsageLimits(request_limit=eng.max_steps)
    history, results = work.history, work.results
    agent = loop.agent(eng)
    async with agent.iter(
        work.prompt, message_history=history, deferred_tool_results=results, deps=turn, model=model, usage_limits=limits
    ) as agent_run:
        held.append(agent_run)
        asked = False  # a model request of this pass went out already
        async for node in agent_run:
            # A stop ends the pass at its next step: before tools run, and before the model is
            # asked again. (Before the first request the start's append checked it; a reply's
            # words are refused once it is asked for; a reply of words only runs nothing.)
            if Agent.is_model_request_node(node):
                if asked and runs.stop_requested(work.run.id):
                    raise Stopped
                asked = True
                # Tools this pass ran: keep the history they reached. (A continuation's first
                # request carries the people's answers, which prepare() rebuilds on a retry.)
                if turn.ran and any(isinstance(p, ToolReturnPart) for p in node.request.parts):
                    await written(save_progress, work, [*agent_run.all_messages(), node.request])
                if streams:
                    await _stream(node, agent_run, text)
            elif Agent.is_call_tools_node(node):
                if node.model_response.tool_calls and runs.stop_requested(work.run.id):
                    raise Stopped
                said = _text_of(node.model_response)
                if said:
                    work.texts.append(said)
                    if not streams:
                        text.new_response()
                        text.add(said)
                text.flush()
        return agent_run.result


async def _stream(node: Any, agent_run: Any, text: _Words) -> None:
    """The model's words as they are generated. Each append to the stream is refused once a stop
    is asked for (Redis checks it in the same step), and the stream is cut at the next words."""
    text.new_response()
    async with node.stream(agent_run.ctx) as stream:
        async for event in stream:
            piece = ""
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                piece = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                piece = event.delta.content_delta
            if piece:
                if text.stopped:
                    raise Stopped
                text.add(piece)
        text.flush()
        if text.stopped:  # (raised inside the stream: its reply, with words never shown, is not kept)
            raise Stopped


_streaming = [0]  # passes of this process whose words are streaming now
_streaming_lock = threading.Lock()


@contextmanager
def streaming() -> Iterator[None]:
    """Counts a pass among this process's streaming ones while it runs."""
    with _streaming_lock:
        _streaming[0] += 1
    try:
        yield
    finally:
        with _streaming_lock:
            _streaming[0] -= 1


class _Words:
    """The streamed text of one pass: a piece goes out at once unless one went out less than a
    window ago; then it goes with the others when the window is up (never held longer). The window
    is `every` seconds, or longer when this process streams more replies than `per_second` events
    a second allow: n replies share them, so each waits n / per_second (each event costs the
    worker a Redis step and wakes every open stream of the conversation). Under load, a reply's
    words come less often and in larger parts instead of slowing every turn down."""

    def __init__(self, conversation_id: int, run_id: int, step: int, every: float, per_second: float) -> None:
        self.conversation_id, self.run_id, self.step = conversation_id, run_id, step
        self.every, self.per_second = every, per_second
        self.buffer: list[str] = []
        self.sent_at = float("-inf")  # the first words go out at once
        self.shown = ""
        self.fresh = False
        self.stopped = False  # an append was refused: a stop was asked for, nothing more goes out
        self.gap = False  # words Redis was away for: the next event carries the whole text (`whole`)
        self.started_at = 0  # where the latest response's words begin in `shown`
        self.later: asyncio.TimerHandle | None = None

    def new_response(self) -> None:
        """The model starts another response in this pass: it reads as a new paragraph."""
        self.fresh = bool(self.shown or self.buffer)
        self.started_at = len(self.shown) + sum(map(len, self.buffer)) + (2 if self.fresh else 0)

    @property
    def response_shown(self) -> str:
        """The latest response's words that went out (a stop may have held back the rest)."""
        return self.shown[self.started_at :]

    def add(self, piece: str) -> None:
        if self.fresh:
            self.buffer.append("\n\n")
            self.fresh = False
        self.buffer.append(piece)
        shared = _streaming[0] / self.per_second if self.per_second > 0 else 0.0  # (0: not shared)
        wait = self.sent_at + max(self.every, shared) - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self.later is None:
            self.later = asyncio.get_running_loop().call_later(wait, self.flush)

    def __enter__(self) -> _Words:
        return self

    def __exit__(self, *exc: object) -> None:
        """The pass's steps are over (done, stopped, failed or cancelled): words still held for the
        next event, and their timer, are dropped, so none goes out after the pass's end. (A step
        that ends flushes its words first; a stop's were refused by Redis already.)"""
        if self.later is not None:
            self.later.cancel()
            self.later = None
        self.buffer.clear()

    def flush(self) -> None:
        if self.later is not None:
            self.later.cancel()
            self.later = None
        if not self.buffer or self.stopped:
            return
        piece = "".join(self.buffer)
        self.buffer.clear()
        self.sent_at = time.monotonic()
        try:
            try:
                said = self._send(piece, whole=self.gap)
            except events.Gone:  # (Redis came back empty since the last words: they are lost too)
                said = self._send(piece, whole=True)
        except events.Refused:
            self.stopped = True
            return
        self.gap = said is None
        self.shown += piece

    def _send(self, piece: str, whole: bool) -> str | None:
        """Publish the next words; `whole`, the whole text so far, marked so: after words Redis was
        away for or lost, a page that showed the words before would otherwise lose them or miss
        the middle. Words that follow others are Gone when the stream lost those."""
        marked: dict[str, Any] = {"whole": True} if whole else {}
        return events.publish(
            self.conversation_id,
            EventType.TEXT,
            unless=runs.stop_key(self.run_id),
            follows=bool(self.shown) and not whole,
            run=self.run_id,
            step=self.step,
            text=self.shown + piece if whole else piece,
            **marked,
        )


def _text_of(response: ModelResponse) -> str:
    return "".join(p.content for p in response.parts if isinstance(p, TextPart)).strip()


async def _heartbeat(run_id: int, every: float) -> None:
    """While the pass runs, say so (turns._sweep ends a pass whose worker stopped saying so)."""
    while True:
        await asyncio.sleep(every)  # (the start's event said it first)
        try:
            redis_client.client.set(runs.alive_key(run_id), "1", ex=runs.alive_for(every))
        except RedisError:
            pass


def _forget_alive(run_id: int) -> None:
    try:
        redis_client.client.delete(runs.alive_key(run_id))
    except RedisError:
        pass


def keep_alive(app: Flask, done: Any) -> None:
    """The worker's housekeeping, at once and then each TURN_HEARTBEAT until `done`: passes whose
    worker died become interrupted, and runs left queued with no job (kept by a process that
    stopped while Redis was away, or taken by a Redis that came back empty) are queued again."""
    while not done.is_set():
        with app.app_context():
            try:
                sweep.sweep_dead(app.config["TURN_DEAD_AFTER"])
                sweep.resubmit_stranded(app.config["TURN_DEAD_AFTER"])
            except Exception:
                log.exception("sweep of dead passes failed")
            finally:
                db.session.remove()
        done.wait(app.config["TURN_HEARTBEAT"])
