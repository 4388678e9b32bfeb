"""A worker process (`flask --app wsgi worker`): the pass's modules and the model's SDK loaded
once, then passes taken from Redis until SIGTERM/SIGINT. Imported by turns.worker, never at start."""

from __future__ import annotations

import gc
import logging
import signal
import threading

from flask import Flask

from app.copilot.turns import _jobs as jobs
from app.copilot.turns import _loop as loop
from app.copilot.turns._agent import engine
from app.copilot.turns._history import dump, load
from app.copilot.turns._pass import keep_alive

log = logging.getLogger(__name__)


def preload(app: Flask) -> None:
    """What a worker's passes import and make once: the agent and its model's modules, and the
    history's validator and serializer (pydantic builds them on first use: 80 ms on a 2-core
    machine, which a first pass would hold every pass on the loop up for)."""
    with app.app_context():
        loop.preload(engine())
    dump(load("[]"))


def tune_collector() -> None:
    """For a process that runs many passes at once, once it has started: what start-up made (the
    app, the agent, the modules) is frozen out of the collector's way, so a full collection walks
    only what passes make; and the youngest generation is collected every 10,000 allocations, not
    700 (a pass allocates thousands of short-lived objects: the model's chunks, their events).
    Measured under L1 (issue 25, 2026-12-06), old and new alternating: the freeze, 3 pairs in the
    ASGI process, 32.9 / 28.9 / 29.9 -> 26.7 / 27.4 / 26.4 ms a turn; the threshold beside it, 6
    pairs, median about 34 -> 28.6 ms (4 pairs lower, 2 within 2 ms higher), peak RSS unchanged."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def serve(app: Flask, threads: int) -> None:
    """Run passes from Redis until SIGTERM/SIGINT: `threads` passes at once on the worker's one
    event loop while their models think, and WORKER_TASK_THREADS tasks (connector deliveries) in
    threads of their own. Stopping takes no more jobs and lets the running passes end (up to
    TURN_TIMEOUT)."""
    runner = app.extensions["turns"]
    if not isinstance(runner, jobs.Dramatiq):
        raise RuntimeError("The worker needs REDIS_URL (and TURNS_RUNNER unset or dramatiq).")
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    # The turn executor, pydantic-ai and the model's SDK, loaded before the first job (not on it).
    preload(app)
    tune_collector()
    turns = jobs.passes(app, threads)
    tasks = jobs._worker(runner.broker, app.config["WORKER_TASK_THREADS"])
    turns.start()
    tasks.start()
    log.info("worker: %d passes at once", threads)
    try:
        keep_alive(app, done)
    finally:
        turns.stop(grace=app.config["TURN_TIMEOUT"])
        tasks.stop()
