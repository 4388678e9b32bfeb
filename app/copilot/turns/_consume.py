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
import time
from collections.abc import Callable, Coroutine
from typing import Any

from dramatiq.errors import BrokerConnectionError
from flask import Flask
from redis.exceptions import RedisError

from app.logs import Sparing

log = logging.getLogger(__name__)
unreachable = Sparing(log)  # (a try every second while Redis is away: a line every few seconds)

Execute = Callable[[Flask, int], Coroutine[Any, Any, None]]

SETTLE_AFTER_STOP_S = 10.0  # a stopped loop's last acknowledgements: how long Redis may take to answer them
UNWIND_S = 10.0  # how long a cancelled pass may take to unwind before stop() leaves it


class PassLoop:
    """At most `limit` passes at once; the rest wait in Redis, where any worker may take them. A
    pass still running after `timeout` seconds is cancelled (its run, claimed and no longer said
    alive, is ended interrupted by the sweep). stop() takes no more jobs, lets the running passes
    end for up to `grace` seconds, cancels the rest, and gives back every job it took that did not
    end: another worker's claim then decides (a pass is never run twice). A job it could neither
    acknowledge nor give back (Redis gone) stays in this worker's acks set, which Dramatiq's broker
    gives back once the worker is dead: it is late, never lost. (The broker's heartbeat is each of
    its Redis calls; the worker's task consumer, on the same broker, keeps making them.)"""

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
        self._unsettled: list[tuple[Any, bool]] = []  # ended, not yet acknowledged or given back
        self._give_up_at = float("inf")  # (set by stop(): the taker's last try at settling)

    def start(self) -> None:
        for target, name in ((self.loop.run_forever, "countersign-passes"), (self._take, "countersign-taker")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, grace: float) -> None:
        self._stopping.set()
        self._room.set()
        asyncio.run_coroutine_threadsafe(self._finish(grace), self.loop).result()
        self._give_up_at = time.monotonic() + SETTLE_AFTER_STOP_S
        self._room.set()
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
                    if self._settled_all():
                        return
                    self._room.wait(self.wake_s)
                elif self.taken() >= self.limit:
                    self._room.wait(self.wake_s)
                else:
                    job = next(self.consumer)  # (None after a wait of up to wake_ms when the queue is empty)
                    unreachable.ok("turn jobs are taken again: Redis answers")
                    if job is not None:
                        self.loop.call_soon_threadsafe(self._begin, job)
            except (RedisError, BrokerConnectionError) as error:  # (the jobs wait in Redis meanwhile)
                unreachable.warning("could not take, acknowledge or give back turn jobs (Redis: %s); trying again", error)
                time.sleep(1)
            except Exception:
                log.exception("could not take, acknowledge or give back turn jobs; trying again")
                time.sleep(1)

    def _settled_all(self) -> bool:
        """Stopping: True once every job taken is settled, or when it is time to give up on Redis."""
        if not self.consumer.outstanding_message_count and not self._unsettled:
            return True
        if time.monotonic() < self._give_up_at:
            return False
        left = [job.message_id for job, _ in self._unsettled] + sorted(self.consumer.queued_message_ids)
        log.error("stopped with turn jobs unsettled (Redis gives them back once this worker is dead): %s", left)
        return True

    def _settle(self) -> None:
        """Acknowledge each job whose pass ended; give back each one stop() cancelled. One that
        Redis refuses now is tried again on the taker's next round."""
        while True:
            try:
                self._unsettled.append(self._ended.get_nowait())
            except queue.Empty:
                break
        failed: list[tuple[Any, bool]] = []
        for job, give_back in self._unsettled:
            try:
                if give_back:
                    self.consumer.requeue([job])
                else:
                    self.consumer.ack(job)
            except Exception:  # (both are safe to repeat: the broker's script checks the acks set first)
                failed.append((job, give_back))
            finally:
                self.consumer.queued_message_ids.discard(job.message_id)
        self._unsettled = failed
        if failed:
            log.warning("%d turn jobs not yet acknowledged or given back (Redis?): trying again", len(failed))
            time.sleep(1)

    def _give_back_prefetched(self) -> None:
        """Jobs fetched from Redis but never handed out go back to the queue (not to wait in this
        worker's acks set until the broker finds it dead)."""
        from dramatiq import Message

        jobs = [Message.decode(data) for data in self.consumer.message_cache if data]
        if jobs:
            self.consumer.requeue(jobs)
        self.consumer.message_cache = []  # (only once given back: a failure tries again next round)

    # The loop's thread: each job's pass is a task.

    def _begin(self, job: Any) -> None:
        task = self.loop.create_task(self._pass(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pass(self, job: Any) -> None:
        give_back = False
        try:
            if self._stopping.is_set():  # (handed over as stop() began: given back, never started)
                give_back = True
                return
            (run_id,) = job.args
            async with asyncio.timeout(self.timeout):
                await self.execute(self.app, int(run_id))
        except TimeoutError:
            log.error("the pass of job %s ran over %s s: cancelled (its run ends interrupted)", job.message_id, self.timeout)
        except asyncio.CancelledError:
            give_back = self._stopping.is_set()  # stop() cancelled it: given back
            raise
        except Exception:
            log.exception("the pass of job %s raised", job.message_id)
        finally:
            self._ended.put((job, give_back))
            self._room.set()

    async def _finish(self, grace: float) -> None:
        """Wait up to `grace` seconds for the running passes, then cancel what is left and wait
        for it to unwind. (No pass starts once stop() began: see _pass.)"""
        if self._tasks and grace > 0:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=UNWIND_S)
        if self._tasks:  # (their jobs stay unsettled: see _settled_all)
            log.error("%d passes did not unwind within %s s of their cancel", len(self._tasks), UNWIND_S)
