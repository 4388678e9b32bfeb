"""The connection pool (app/loop_pool.py): a thread waits its turn for a connection, an event loop
only briefly (issue 25: threads waiting for a lock held every connection, and the loop that asked
for one for a read stood still with them, and every stream and pass of the process with it)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import sqlalchemy as sa

from app.loop_pool import LOOP_KEEP, LoopWaitsBriefly


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    made = sa.create_engine(url, poolclass=LoopWaitsBriefly, pool_size=1, max_overflow=0, pool_timeout=1)
    yield made
    made.dispose()


def test_with_every_connection_taken_a_thread_waits_but_the_loop_gets_one_of_its_own(engine):
    held = engine.connect()  # (the pool's only connection, as a thread waiting for a lock holds it)
    try:
        with pytest.raises(sa.exc.TimeoutError):  # a thread: QueuePool's wait, then its error
            engine.connect()

        async def on_the_loop() -> int:
            with engine.connect() as connection:
                return int(connection.execute(sa.text("SELECT 1")).scalar_one())

        assert asyncio.run(on_the_loop()) == 1
    finally:
        held.close()
    assert engine.pool.checkedout() == 0


def test_the_loops_connections_are_kept_for_the_loops_and_never_counted_against_the_threads(engine):
    opened: list[object] = []
    sa.event.listen(engine, "connect", lambda dbapi_connection, record: opened.append(dbapi_connection))

    async def at_once(n: int) -> None:
        connections = [engine.connect() for _ in range(n)]  # (more at once than the pool's limit)
        for connection in connections:
            connection.close()

    asyncio.run(at_once(LOOP_KEEP + 1))
    assert len(opened) == LOOP_KEEP + 1
    asyncio.run(at_once(LOOP_KEEP))
    assert len(opened) == LOOP_KEEP + 1  # the ones kept are taken again, none opened anew
    taken: list[sa.Connection] = []
    thread = threading.Thread(target=lambda: taken.append(engine.connect()))
    thread.start()
    thread.join(10)
    assert taken  # the pool's own connection is still free for a thread, at once
    taken[0].close()
