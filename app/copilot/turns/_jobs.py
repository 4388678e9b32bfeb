"""Where a turn's pass runs (TURNS_RUNNER): `dramatiq` — queued over REDIS_URL with Dramatiq's
broker, taken by a worker (`flask --app wsgi worker`) whose one event loop runs many passes at
once while their models think (turns/_consume.py);
`pool` — the same job in a bounded pool inside this process (the default without REDIS_URL);
`inline` — at once, in the caller (the test kit). Every runner calls the pass turns.init_app registered."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from flask import Flask, current_app

from app.copilot.turns import _kept
from app.logs import Sparing

log = logging.getLogger(__name__)

QUEUE = "turns"
TASKS = "tasks"  # plain jobs beside the turns: a chat connector's delivery, posting a turn's reply


def call(target: str, *args: Any) -> None:
    """Run `module:function(*args)` as a job in the app's context (a worker with Redis, a thread
    of this process in the pool, now when inline). Raises when it could not be queued."""
    runner: Runner = current_app.extensions["turns"]
    runner.call(target, *args)


def _execute(app: Flask) -> Callable[..., Coroutine[Any, Any, None]]:
    """The pass the runners run, as turns.init_app registered it: jobs know how to queue and run
    a pass, not what a pass is (so nothing here imports the turn executor)."""
    found: Callable[..., Coroutine[Any, Any, None]] = app.extensions["turns.execute"]
    return found


def run_task(app: Flask, target: str, args: list[Any]) -> Any:
    """The task job: import the function and call it in an app context of its own."""
    import importlib

    from app.extensions import db

    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    with app.app_context():
        try:
            return function(*args)
        finally:
            db.session.remove()


def submit(run_id: int) -> None:
    """Hand a queued pass to the app's runner; one it cannot take (Redis away) is kept by
    turns._kept and sent once Redis answers (one whose process stopped: turns._sweep)."""
    _kept.send(run_id)


def runs_now() -> bool:
    """Whether the app's runner runs a pass at once, in its caller (`inline`): a run it is
    handed may be claimed as it is written (turns.start) and given with run_claimed()."""
    runner: Runner = current_app.extensions["turns"]
    return isinstance(runner, Inline)


def run_claimed(claimed: Any) -> None:
    """Run now the pass of a run claimed as it was written (turns._line.Claimed), with the `inline` runner."""
    runner: Runner = current_app.extensions["turns"]
    assert isinstance(runner, Inline), "only the inline runner runs a claimed pass in its caller"
    runner.submit(claimed.run.id, claimed)


CONSUMER_WAKE_MS = 100  # an idle consumer asks Redis for new jobs this often: a turn waits no longer
THREAD_WAKE_MS = 1000  # an idle job thread looks up this often (a job handed to it wakes it at once)
DRAIN_WAKE_MS = 10  # a burst (`drain`) looks this often: it runs until idle, then stops


class Runner:
    def __init__(self, app: Flask) -> None:
        self.app = app

    def submit(self, run_id: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the runner holds (the pool's loop)."""

    def call(self, target: str, *args: Any) -> None:
        """A task in a thread of this process (its own app context)."""
        threading.Thread(target=run_task, args=(self.app, target, list(args)), name=f"task-{target}", daemon=True).start()


class Inline(Runner):
    """The pass runs now, in the caller's thread, on an event loop of its own; tasks too."""

    def submit(self, run_id: int, claimed: Any = None) -> None:
        asyncio.run(_execute(self.app)(self.app, run_id, claimed))

    def call(self, target: str, *args: Any) -> None:
        run_task(self.app, target, list(args))


class Pool(Runner):
    """A bounded pool in this process: one event loop thread, at most TURNS_CONCURRENCY passes at
    once (the rest wait their turn in the loop)."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._limit: asyncio.Semaphore | None = None
        self._futures: set[Future[Any]] = set()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    self._limit = asyncio.Semaphore(self.app.config["TURNS_CONCURRENCY"])
                    ready.set()
                    try:
                        loop.run_forever()
                    finally:
                        for task in asyncio.all_tasks(loop):
                            task.cancel()
                        loop.run_until_complete(asyncio.sleep(0))
                        loop.close()

                threading.Thread(target=serve, name="countersign-turns", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    async def _bounded(self, run_id: int) -> None:
        assert self._limit is not None
        async with self._limit:
            await _execute(self.app)(self.app, run_id)

    def submit(self, run_id: int) -> None:
        future = asyncio.run_coroutine_threadsafe(self._bounded(run_id), self._start())
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("a pass raised", exc_info=future.exception())

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no pass is running or waiting (tests); False if some still are."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                pending = list(self._futures)
            if not pending:
                return True
            for future in pending:
                try:
                    future.result(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:  # noqa: S110 — its own callback logged it
                    pass
        return False


class Dramatiq(Runner):
    """Passes go to Redis; `flask --app wsgi worker` runs them (see worker())."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app)
        self.broker, self.actor, self.task = _dramatiq(app)

    def submit(self, run_id: int) -> None:
        self.actor.send(run_id)

    def call(self, target: str, *args: Any) -> None:
        self.task.send(target, list(args))

    def close(self) -> None:
        self.broker.client.connection_pool.disconnect()


def _dramatiq(app: Flask) -> tuple[Any, Any, Any]:
    """A Redis broker for this app, and the two actors on it: `turn` (its jobs are taken by a
    worker's PassLoop, never by Dramatiq's worker) and `task`. Retries are off: a pass is never
    run twice by the queue (a claim decides), nor a task."""
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.middleware import AgeLimit, Callbacks, Pipelines, ShutdownNotifications, TimeLimit

    class UndelayedBroker(RedisBroker):
        """Dramatiq's Redis broker, refusing a delayed job: the worker polls no delay queue, so
        one would never run (see _worker)."""

        def enqueue(self, message: Any, *, delay: int | None = None) -> Any:
            if delay:
                raise ValueError("a delayed job would never run: the worker polls no delay queue")
            return super().enqueue(message)

    from app.extensions import redis_from_url

    broker = UndelayedBroker(  # type: ignore[no-untyped-call]
        client=redis_from_url(app.config["REDIS_URL"]),
        namespace="countersign",
        middleware=[AgeLimit(), TimeLimit(), ShutdownNotifications(), Callbacks(), Pipelines()],
    )

    def turn(run_id: int) -> None:
        raise RuntimeError("turn jobs are taken by a worker's PassLoop (turns/_consume.py), not by Dramatiq's worker")

    def task(target: str, args: list[Any]) -> None:
        run_task(app, target, args)

    options: dict[str, Any] = {"broker": broker, "priority": 0}
    actor: Any = dramatiq.Actor(turn, actor_name="turn", queue_name=QUEUE, options={"max_retries": 0}, **options)
    limits = {"time_limit": app.config["TURN_TIMEOUT"] * 1000, "max_retries": 0}
    tasks = dramatiq.Actor(task, actor_name="task", queue_name=TASKS, options=limits, **options)
    return broker, actor, tasks


def passes(app: Flask, limit: int, wake_ms: int = CONSUMER_WAKE_MS) -> Any:
    """The app's turn jobs, taken by a PassLoop: `limit` passes at once on one event loop."""
    from app.copilot.turns._consume import PassLoop

    runner = app.extensions["turns"]
    return PassLoop(app, runner.broker, QUEUE, _execute(app), limit, wake_ms, app.config["TURN_TIMEOUT"])


def init_app(app: Flask) -> None:
    runner = app.config["TURNS_RUNNER"] or ("dramatiq" if app.config.get("REDIS_URL") else "pool")
    kinds: dict[str, type[Runner]] = {"inline": Inline, "pool": Pool, "dramatiq": Dramatiq}
    if runner not in kinds:
        raise ValueError(f"TURNS_RUNNER={runner!r}: use dramatiq, pool or inline")
    app.extensions["turns"] = kinds[runner](app)


def drain(app: Flask, threads: int = 4, timeout: float = 300) -> None:
    """Run every queued turn and task in this process until none is left, then stop (tests, and
    `flask --app wsgi worker --burst`)."""
    import time

    runner = app.extensions["turns"]
    if not isinstance(runner, Dramatiq):
        return
    broker = runner.broker
    # It stops once nothing is left, and stopping waits for each thread's next wake-up: a burst
    # wakes its threads and polls its queues every DRAIN_WAKE_MS, so it ends soon after its jobs.
    turns = passes(app, threads, wake_ms=DRAIN_WAKE_MS)
    worker = _worker(broker, threads, thread_wake_ms=DRAIN_WAKE_MS, consumer_wake_ms=DRAIN_WAKE_MS)
    turns.start()
    worker.start()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for queue in (QUEUE, TASKS):
                left = int(max(1.0, deadline - time.monotonic()) * 1000)
                broker.join(queue, interval=DRAIN_WAKE_MS, timeout=left)
            worker.join()
            if _idle(broker):
                return
        raise TimeoutError(f"jobs still queued after {timeout} s")
    finally:
        turns.stop(grace=0)
        worker.stop()


def _worker(broker: Any, threads: int, thread_wake_ms: int = THREAD_WAKE_MS, consumer_wake_ms: int = CONSUMER_WAKE_MS) -> Any:
    """Dramatiq's worker for the task queue (a turn's jobs are a PassLoop's). Dramatiq gives its
    consumer and its job threads one wake-up interval; here they differ: the consumer polls Redis
    every CONSUMER_WAKE_MS, while the idle job threads (each waiting on the in-process work queue)
    wake every THREAD_WAKE_MS, not ten times a second each (`test_worker.py` checks the
    intervals). Nor does it poll the queue's delay queue, as Dramatiq's does: no job here is ever
    delayed (retries are off, nothing is sent with `delay=`)."""
    from dramatiq import Worker
    from dramatiq.worker import WorkerThread

    class TaskWorker(Worker):
        def _add_consumer(self, queue_name: str, *, delay: bool = False) -> None:
            if not delay:  # (nothing here sends a delayed job: no retries, no `delay=`)
                super()._add_consumer(queue_name)

        def _add_worker(self) -> None:  # (dramatiq 2.2's, with the threads' own interval)
            thread = WorkerThread(
                broker=self.broker, consumers=self.consumers, work_queue=self.work_queue, worker_timeout=thread_wake_ms
            )
            thread.start()
            self.workers.append(thread)

    # Its consumer says its connection error every 3 s while Redis is away: one line every 10 s.
    logging.getLogger(f"dramatiq.worker.ConsumerThread({TASKS})").addFilter(_CONSUMER_QUIET)
    return TaskWorker(broker, worker_threads=threads, queues={TASKS}, worker_timeout=consumer_wake_ms)


_CONSUMER_QUIET = Sparing(level=logging.WARNING)  # (CRITICAL, it says, for an outage it rides out)


def _idle(broker: Any) -> bool:
    """Nothing queued and nothing taken but not yet acknowledged (a job in a worker's hands: the
    broker moves a message to its acks set as it hands it out, and drops it once the job ended)."""
    if any(broker.do_qsize(queue) for queue in (QUEUE, TASKS)):
        return False
    client = broker.client
    return not any(client.scard(key) for key in client.scan_iter(match=f"{broker.namespace}:__acks__.*"))
