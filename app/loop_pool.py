"""The connection pool: a thread waits its turn for a connection, an event loop only briefly.

A process that runs passes on an event loop (the ASGI server, a turn worker) also has threads that
use the database: its requests, a pass's writes that a lock kept waiting (turns._writes).
SQLAlchemy's QueuePool holds them to `pool_size + max_overflow` connections at once and makes the
rest wait, which keeps a busy SQLite fair (its own wait for the write lock is not) and a PostgreSQL
server within its connections. But a thread that waits for a lock holds its connection meanwhile:
with another process holding the lock for seconds, every connection of the pool can be held by
threads waiting for it, and the event loop, asking for one for a read that WAL or MVCC lets it make
at once (a stream's check of its credential, the rendering of an event), waited with them: every
pass, stream and request of the process stood still until the lock went (issue 25). So a caller on
a running event loop waits LOOP_WAIT_S at most for one of the pool's connections, then takes one of
the loops' own, outside the pool's count (or opens one); given back, such a connection is kept for
the loops (up to LOOP_KEEP; a loop takes one connection at a time, and a process has one loop)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.pool import ConnectionPoolEntry, QueuePool
from sqlalchemy.util import queue as sqla_queue

LOOP_KEEP = 2
# How long a loop waits for one of the pool's connections before it takes one of its own. A busy
# pool gives one back within milliseconds; a loop that waits so long lets the threads that hold
# them (requests) finish, as it did before (measured, streamed L1 on SQLite, 4 pairs, 2026-12-07:
# never waiting at all, the requests' threads got the GIL less often, the POSTs took 1.0-1.3 s
# instead of 0.7-0.9 s, and a turn cost 4-7 ms more CPU).
LOOP_WAIT_S = 0.02


class LoopWaitsBriefly(QueuePool):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loops: list[ConnectionPoolEntry] = []  # the loops' own connections, idle

    def _do_get(self) -> ConnectionPoolEntry:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a thread, not an event loop: it waits its turn
            return super()._do_get()
        # As a thread would, but waiting LOOP_WAIT_S at most for the pool's connections.
        full = self._max_overflow > -1 and self._overflow >= self._max_overflow
        try:
            return self._pool.get(full, LOOP_WAIT_S)
        except sqla_queue.Empty:
            pass
        if not full and self._inc_overflow():
            try:
                return self._create_connection()
            except BaseException:
                self._dec_overflow()
                raise
        with self._overflow_lock:
            if self._loops:
                return self._loops.pop()
        record = self._create_connection()
        _info(record)["loop"] = True
        return record

    def _do_return_conn(self, record: ConnectionPoolEntry) -> None:
        if not _info(record).get("loop"):
            super()._do_return_conn(record)
            return
        with self._overflow_lock:
            if len(self._loops) < LOOP_KEEP:
                self._loops.append(record)
                return
        record.close()

    def dispose(self) -> None:
        with self._overflow_lock:
            kept, self._loops = self._loops, []
        for record in kept:
            record.close()
        super().dispose()


def _info(record: ConnectionPoolEntry) -> dict[str, Any]:
    """What the record keeps for its whole life, across reconnects (SQLAlchemy makes it on first use)."""
    info = record.record_info
    assert info is not None
    return info
