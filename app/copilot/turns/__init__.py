"""A turn from queued to ended: a message, an answered card or a retry queues a run (committed
before any worker sees it); a worker runs its passes — history, the agent loop, the model's
streamed words, the cards it makes — and ends it (done, paused on its cards, stopped, failed,
interrupted). Its modules are private: this list is the package. The pass itself (and
pydantic-ai with it) is imported by the first pass, not at start."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Flask

from app.copilot.turns import _jobs
from app.copilot.turns._agent import Engine, call_direct, context_for, engine, tell
from app.copilot.turns._jobs import call, drain, submit
from app.copilot.turns._kept import send_until_sent
from app.copilot.turns._line import Claimed
from app.copilot.turns._notices import queue_countersign_notice
from app.copilot.turns._runs import (
    active,
    answers,
    card_message_id,
    check_own,
    hold_live,
    latest_run,
    newest_message_id,
    resume_if_ready,
    retry,
    start,
    stop,
    wait,
)
from app.copilot.turns._sweep import sweep_dead
from app.models import Message

# Called with (conversation_id, the messages a pass added) after each pass ends: the chat
# connectors post them into their threads.
Listener = Callable[[int, list[Message]], None]

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo

__all__ = [
    "Claimed",
    "Engine",
    "active",
    "answers",
    "call",
    "call_direct",
    "card_message_id",
    "check_own",
    "context_for",
    "drain",
    "engine",
    "execute",
    "hold_live",
    "init_app",
    "latest_run",
    "listen",
    "listen_cards",
    "listen_countersign",
    "listen_decided",
    "tell",
    "newest_message_id",
    "offline_respond",
    "parse_slash",
    "preload",
    "queue_countersign_notice",
    "resume_if_ready",
    "retry",
    "start",
    "stop",
    "submit",
    "sweep_dead",
    "tune_collector",
    "wait",
    "worker",
]


def init_app(app: Flask) -> None:
    """Per-app state: the runner passes go to (TURNS_RUNNER), the pass it runs, and the turn
    listeners (`listen`)."""
    app.extensions["turns.execute"] = execute
    app.extensions.setdefault("turns.listeners", [])
    _jobs.init_app(app)
    app.extensions["kept.sender"] = send_until_sent  # (what Redis was away for: turns._kept)


def listen_cards(app: Flask, listener: Callable[[list[str]], None]) -> None:
    """Call `listener(approval ids)` after a pass or a client's own call asks for cards (committed):
    the chat connectors send them to the person's linked channels."""
    app.extensions.setdefault("turns.card_listeners", []).append(listener)


def listen_countersign(app: Flask, listener: Callable[[str], None]) -> None:
    """Call `listener(approval id)` when a card waits for its second signature (the chat connectors
    send its link to the countersigners' linked chats)."""
    app.extensions.setdefault("turns.countersign_listeners", []).append(listener)


def listen_decided(app: Flask, listener: Callable[[str], None]) -> None:
    """Call `listener(approval id)` when a card that was sent outside its own page and thread (its
    `posted` messages) is decided, whoever decided it: the chat connectors show its outcome there."""
    app.extensions.setdefault("turns.decided_listeners", []).append(listener)


def listen(app: Flask, listener: Listener) -> None:
    """Call `listener(conversation_id, the messages a pass added)` after each pass of this app
    ends (the chat connectors post them into their threads)."""
    app.extensions.setdefault("turns.listeners", []).append(listener)


async def execute(app: Flask, run_id: int, claimed: Claimed | None = None) -> None:
    """One pass of the run, as the runners call it (nothing, when it was not the caller's to run:
    claimed already, or behind another pass of its conversation, which queues it when it ends);
    `claimed`: the run as `start(…, claim=True)` wrote it, claimed, for its caller to run, with
    its person.
    (The import is here so that the app starts without pydantic-ai: the first pass loads it.)"""
    from app.copilot.turns._pass import execute as run_pass

    await run_pass(app, run_id, claimed)


def preload(app: Flask) -> None:
    """Import the pass's modules and make the agent now, not on the first pass (a process that
    runs passes as it starts: a worker, the ASGI server)."""
    from app.copilot.turns._serve import preload as load

    load(app)


def tune_collector() -> None:
    """Set the garbage collector for a process that runs passes, once it has started (_serve)."""
    from app.copilot.turns._serve import tune_collector as tune

    tune()


def worker(app: Flask, threads: int) -> None:
    """`flask --app wsgi worker`: run passes from Redis until SIGTERM/SIGINT (the pass's modules
    loaded first, not on the first job)."""
    from app.copilot.turns._serve import serve

    serve(app, threads)


def parse_slash(text: str) -> tuple[str, dict[str, Any]] | None:
    """The offline model's reading of `/action field=value …` (the kit's contract check uses it)."""
    from app.copilot.turns._offline import parse_slash as parse

    return parse(text)


def offline_respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The offline model's answer (the kit's queued model falls back to it when nothing is queued)."""
    from app.copilot.turns._offline import offline_respond as respond

    return respond(messages, info)
