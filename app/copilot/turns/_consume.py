"""A worker's passes (`flask --app wsgi worker`, and `drain`): turn jobs taken from Redis by one
thread and run on one event loop, each pass a task, each job acknowledged when its pass ends.

The jobs stay Dramatiq's messages on its Redis broker (the web queues them as before, and a dead
worker's jobs are given back by the broker), but Dramatiq's own worker would hold one of its
threads per pass, blocked until the pass ended on the loop: measured 2026-12-05, 200 passes of a
2 s model cost that worker 33–35 ms of CPU each against 28 ms here (issue 25)."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from flask import Flask

log = logging.getLogger(__name__)

Execute = Callable[[Flask, int], Coroutine[Any, Any, None]]


class PassLoop:
    """At most `limit` passes at once; the rest wait in Redis, where any worker may take them. A
    pass still running after `timeout` seconds is cancelled (its run, claimed and no longer said
    alive, is ended interrupted by the sweep). stop() takes no more jobs, lets the running passes
    end for up to `grace` seconds, cancels the rest, and gives back every job it took that did not
    end: another worker's claim then decides (a pass is never run twice)."""

    def __init__(
        self, app: Flask, broker: Any, queue_name: str, execute: Execute, limit: int, wake_ms: int, timeout: float
    ) -> None:
        self.app, self.execute, self.limit, self.timeout = app, execute, limit, timeout
        self.wake_s = wake_ms / 1000
        # Dramatiq's consumer: a job it hands out is in this worker's acks set in Redis until
        # acknowledged; prefetch = limit, so it never holds more than the loop may run.
        self.consumer = broker.consume(queue_name, prefetch=limit, timeout=wake_ms)
        self.loop = asyncio.new_event_loop()
        self._ended: queue.SimpleQueue[tuple[Any, bool]] = queue.SimpleQueue()  # (job, give it back)
        self._room = threading.Event()  # a pass ended, or stop(): the taker looks again at once
        self._stopping = threading.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for target, name in ((self.loop.run_forever, "countersign-passes"), (self._take, "countersign-taker")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, grace: float) -> None:
        self._stopping.set()
        self._room.set()
        asyncio.run_coroutine_threadsafe(self._finish(grace), self.loop).result()
        loop_thread, taker = self._threads
        taker.join()
        self.loop.call_soon_threadsafe(self.loop.stop)
        loop_thread.join()
        self.loop.close()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def taken(self) -> int:
        """Jobs handed to the loop and not yet acknowledged (running, or about to start). (Jobs
        fetched but not yet handed out wait in the consumer's cache: at most limit in all.)"""
        return len(self.consumer.queued_message_ids)

    # The taker's thread: fetches jobs while there is room, acknowledges the ended ones.

    def _take(self) -> None:
        while True:
            self._room.clear()  # (before looking: a pass ending from here on wakes the wait below)
            try:
                self._settle()
                if self._stopping.is_set():
                    self._give_back_prefetched()
                    if not self.consumer.outstanding_message_count:
                        return
                    self._room.wait(self.wake_s)
                elif self.taken() >= self.limit:
                    self._room.wait(self.wake_s)
                else:
                    job = next(self.consumer)  # (None after a wait of up to wake_ms when the queue is empty)
                    if job is not None:
                        self.loop.call_soon_threadsafe(self._begin, job)
            except Exception:  # Redis unreachable, most often: the jobs wait in Redis meanwhile
                log.exception("could not take or acknowledge turn jobs; trying again")
                self._stopping.wait(1)

    def _settle(self) -> None:
        """Acknowledge each job whose pass ended; give back each one stop() cancelled."""
        while True:
            try:
                job, give_back = self._ended.get_nowait()
            except queue.Empty:
                return
            if give_back:
                self.consumer.requeue([job])
                self.consumer.queued_message_ids.discard(job.message_id)
            else:
                self.consumer.ack(job)

    def _give_back_prefetched(self) -> None:
        """Jobs fetched from Redis but never handed out go back to the queue (not to wait in this
        worker's acks set until the broker finds it dead)."""
        from dramatiq import Message

        cached, self.consumer.message_cache = self.consumer.message_cache, []
        jobs = [Message.decode(data) for data in cached if data]
        if jobs:
            self.consumer.requeue(jobs)

    # The loop's thread: each job's pass is a task.

    def _begin(self, job: Any) -> None:
        if self._stopping.is_set():  # (handed over as stop() began: given back, never started)
            self._ended.put((job, True))
            self._room.set()
            return
        task = self.loop.create_task(self._pass(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pass(self, job: Any) -> None:
        give_back = False
        try:
            (run_id,) = job.args
            async with asyncio.timeout(self.timeout):
                await self.execute(self.app, int(run_id))
        except TimeoutError:
            log.error("the pass of job %s ran over %s s: cancelled (its run ends interrupted)", job.message_id, self.timeout)
        except asyncio.CancelledError:
            give_back = True  # stop() cancelled it
            raise
        except Exception:
            log.exception("the pass of job %s raised", job.message_id)
        finally:
            self._ended.put((job, give_back))
            self._room.set()

    async def _finish(self, grace: float) -> None:
        """Wait up to `grace` seconds for the running passes, then cancel what is left and wait
        for it to unwind. (No pass starts once stop() began: see _begin.)"""
        if self._tasks and grace > 0:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        while self._tasks:
            await asyncio.wait(set(self._tasks))
