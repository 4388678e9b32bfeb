"""The connection pool: a thread waits its turn for a connection, an event loop never does.

A process that runs passes on an event loop (the ASGI server, a turn worker) also has threads that
use the database: its requests, a pass's writes that a lock kept waiting (turns._writes).
SQLAlchemy's QueuePool holds them to `pool_size + max_overflow` connections at once and makes the
rest wait, which keeps a busy SQLite fair (its own wait for the write lock is not) and a PostgreSQL
server within its connections. But a thread that waits for a lock holds its connection meanwhile:
with another process holding the lock for seconds, every connection of the pool can be held by
threads waiting for it, and the event loop, asking for one for a read that WAL or MVCC lets it make
at once (a stream's check of its credential, the rendering of an event), waited with them: every
pass, stream and request of the process stood still until the lock went (issue 25). So the event
loops of a process have connections of their own, outside the pool's count: a caller on a running
loop takes one of them, or opens one, and never waits; given back, it is kept for the loops (up to
LOOP_KEEP; a loop takes one connection at a time, and a process has one loop)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

LOOP_KEEP = 2


class LoopNeverWaits(QueuePool):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loops: list[ConnectionPoolEntry] = []  # the loops' own connections, idle

    def _do_get(self) -> ConnectionPoolEntry:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a thread, not an event loop: it waits its turn
            return super()._do_get()
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
