"""P2 (part): N chat threads each waiting for "yes" on its own card, posted through the real
post_card() into a Redis of the benchmark's own: threads held by the waits, and Redis memory.
The chat service itself is left out (its send() does nothing), so only our state is counted.

    python bench/connector_waits.py [--n 100000] [--json]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from _harness import env_for, free_port, insert_approvals, prepare, temp_sqlite


def run(n: int) -> dict[str, float]:
    import redis

    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(100):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        database_url = temp_sqlite()
        env = env_for(database_url, REDIS_URL=url, CONNECTOR_CONFIRM_TTL="3600")
        prepare(database_url, env)
        os.environ.update(env)
        return _waits(n, url)
    finally:
        server.terminate()
        server.wait(timeout=10)


def _waits(n: int, url: str) -> dict[str, float]:
    import redis
    import sqlalchemy as sa

    from app import create_app
    from app.connectors import CONNECTORS
    from app.connectors.base import post_card
    from app.extensions import db
    from app.models import Approval, ConnectorThread, User

    class Quiet(type(CONNECTORS["telegram"])):  # type: ignore[misc]
        """Telegram with its card and buttons built, and nothing sent (its Bot API call answers {})."""

        def _call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
            return {}

    app = create_app({"SWEEP_ON_START": False})
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        convo = insert_approvals(user, n, "w")
        for start in range(0, n, 10_000):
            db.session.execute(
                sa.insert(ConnectorThread),
                [
                    {
                        "connector": "telegram",
                        "thread_key": str(-(10**9) - i),
                        "user_id": user.id,
                        "conversation_id": convo,
                        "address": "",
                        "subject": "",
                    }
                    for i in range(start, min(n, start + 10_000))
                ],
            )
        db.session.commit()
        client = redis.Redis.from_url(url)
        quiet = Quiet()
        before_threads = threading.active_count()
        before_memory = client.info("memory")["used_memory"]
        threads = db.session.scalars(sa.select(ConnectorThread).order_by(ConnectorThread.id))
        approvals = db.session.scalars(sa.select(Approval).where(Approval.id.like("w%")).order_by(Approval.id))
        started = time.perf_counter()
        for thread, approval in zip(threads, approvals, strict=True):
            post_card(quiet, thread, approval)
        elapsed = time.perf_counter() - started
        waiting = client.dbsize()
        return {
            "n": n,
            "waiting": waiting,
            "extra_threads": threading.active_count() - before_threads,
            "redis_mb": (client.info("memory")["used_memory"] - before_memory) / 2**20,
            "post_card_ms": elapsed / n * 1000,
        }


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 100_000
    result = run(n)
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        print(
            f"P2 {result['waiting']:,} waiting threads: {result['extra_threads']} extra threads, "
            f"Redis +{result['redis_mb']:.1f} MB, post_card {result['post_card_ms']:.3f} ms each"
        )
