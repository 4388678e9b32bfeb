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
from app.copilot.turns._pass import keep_alive

log = logging.getLogger(__name__)


def preload(app: Flask) -> None:
    """What a worker's passes import and make once: the agent and its model's modules."""
    with app.app_context():
        loop.preload(engine())


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
    # The turn executor, pydantic-ai and the model's SDK, loaded before the first job (not on it);
    # then all start-up made is frozen out of the collector's way (its full collections walk only
    # what passes make: issue 25, measured in the ASGI process that runs passes the same way).
    preload(app)
    gc.freeze()
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
