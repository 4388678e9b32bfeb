"""A pass's writes (its claim, its progress, its end, its actions' calls) from the event loop its
pass runs on, which they may not hold up. Each is a transaction that may wait for a lock: SQLite's
write lock (up to its 30 s busy timeout), a PostgreSQL row another transaction holds. Written on
the loop as it was, a lock another process held for seconds left every pass, stream and request of
the process waiting with it (issue 25: probes answered 28.5 s late), and past the busy timeout the
end failed and its reply was lost.

So a write is tried on the loop waiting LOOP_LOCK_WAIT_MS at most for a lock (extensions
no_lock_wait: the usual case, where another writer's commit lets the lock go within milliseconds,
stays as cheap as it was), and when that is not enough it is undone and written again in a thread
of its own, where it waits as any request does. Always in a thread instead, streamed L1 on SQLite
cost about 9 ms more CPU a turn and a second more at p99 (three pairs, 2026-12-07): the threads
and the busy loop took turns for the GIL at every statement. An action's call, developers' code
that may wait on anything (a provider's API), always runs in a thread."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import sqlalchemy as sa

from app.extensions import db, lock_busy, no_lock_wait

log = logging.getLogger(__name__)
Result = TypeVar("Result")

WRITERS = 8  # a process's pass writes in threads at once (SQLite takes its writes one at a time anyway)
_writers: list[ThreadPoolExecutor] = []
_writers_lock = threading.Lock()


async def written(write: Callable[..., Result], *args: Any) -> Result:
    """`write(*args)`, a pass's transaction: on the loop if no lock keeps it waiting there, else
    in a thread (in_thread). (A session already in a transaction took its connection to wait as
    long as it may: straight to a thread.)"""
    if not db.session().in_transaction():
        waiting = no_lock_wait.set(True)
        try:
            return write(*args)
        except sa.exc.OperationalError as error:
            db.session.rollback()
            if not lock_busy(error):
                raise
        finally:
            no_lock_wait.reset(waiting)
    while True:  # (a try on the loop was undone)
        try:
            return await in_thread(write, *args)
        except sa.exc.OperationalError as error:
            # A lock held past the wait a thread gives it (SQLite's busy timeout): undone, so
            # written again, until the lock goes or the pass's time is up (TURN_TIMEOUT cancels
            # it). The pass's heartbeat goes on meanwhile: no sweep takes it for dead.
            if not lock_busy(error):
                raise
            log.warning("a pass's write (%s) found a lock still held: writing it again", getattr(write, "__name__", "?"))
        except sa.exc.TimeoutError:
            # No pooled connection for the thread within the pool's timeout: requests waiting for
            # the same lock held them all (a helper's 36 s SQLite lock: the pass ended
            # `interrupted`, its reply lost). They give theirs back as they fail; written again.
            log.warning("a pass's write (%s) found no pooled connection free: writing it again", getattr(write, "__name__", "?"))


async def in_thread(write: Callable[..., Result], *args: Any) -> Result:
    """`write(*args)` in a writer thread, in this pass's context (its app context, so its session:
    the pass awaits it, nothing else uses the session meanwhile). A pass cancelled meanwhile
    (TURN_TIMEOUT, a process stopping) waits for the write to finish, then is cancelled: its
    session is never let go while a thread still uses it."""
    with _writers_lock:
        if not _writers:
            _writers.append(ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="countersign-pass-write"))
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(_writers[0], functools.partial(context.run, _ended, write, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except Exception:  # (the cancellation goes on: what the write raised is for the log)
                log.exception("a cancelled pass's write raised")
        raise


def _ended(write: Callable[..., Result], *args: Any) -> Result:
    """`write(*args)` in its thread, and then no transaction left open: what ran after its commit
    (a turn listener's read) would otherwise hold one of the pool's connections until the pass is
    next on the loop. (On the loop, what follows the write there ends it without waiting.)"""
    session = db.session()
    try:
        result = write(*args)
    except BaseException:
        session.rollback()
        raise
    if session.in_transaction():
        session.commit()  # (a read's: nothing to write; the pass keeps its objects as they are)
    return result
