"""P5: how fast a connector webhook is acknowledged under 50 requests per second (Telegram's,
verified and queued for a Dramatiq worker, none running), against the one-INSERT endpoint at the
same rate, both under gunicorn, alternating, in one run. Needs a Redis (REDIS_URL, default db 14).

    python bench/webhook_ack.py [--seconds 10] [--json]

Each worker is warmed up first: without it, the first requests a fresh worker serves (first
imports and connections; measured when the queue was RQ's) took ~1.4 s and made up the whole p99 on both sides.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time

from _harness import compare, env_for, gunicorn, prepare, temp_sqlite

SECRET = "bench-telegram-secret"


def run(seconds: int, database_url: str) -> dict[str, object]:
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11")
    env = env_for(
        database_url,
        REDIS_URL=redis_url,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_BOT_TOKEN="1:x",
        TELEGRAM_API_BASE="http://127.0.0.1:9",
    )
    token = prepare(database_url, env)
    acks: list[float] = []
    inserts: list[float] = []
    lock = threading.Lock()
    with gunicorn(env, workers=2) as port:

        def one(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            if i % 2 == 0:
                body = json.dumps(
                    {
                        "update_id": 10_000_000 + i,
                        "message": {"message_id": i, "from": {"id": 42}, "chat": {"id": 42}, "text": "hello"},
                    }
                )
                headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": SECRET}
                path, bucket = "/connectors/telegram", acks
            else:
                body, path, bucket = "{}", "/api/_probe/insert", inserts
                headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
            start = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - start
            conn.close()
            if response.status == 200:
                with lock:
                    bucket.append(elapsed)

        for i in range(-200, 0):  # warm both paths in every worker (first imports, first connections)
            one(i)
        acks.clear()
        inserts.clear()
        threads = []
        for i in range(seconds * 100):  # 50 webhooks and 50 inserts a second, evenly spaced
            t = threading.Thread(target=one, args=(i,))
            t.start()
            threads.append(t)
            time.sleep(0.01)
        for t in threads:
            t.join()
    import redis

    redis.Redis.from_url(redis_url).flushdb()  # the queued turns and dedupe keys of this run
    return compare("insert", "webhook_ack", inserts, acks, database_url)


if __name__ == "__main__":
    seconds = int(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 10
    result = run(seconds, temp_sqlite())
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        for name in ("insert", "webhook_ack"):
            s = result[name]
            print(f"P5 {name:<12} median {s['median_ms']:.2f} ms   p99 {s['p99_ms']:.2f} ms")
        print(f"P5 ratio        median {result['ratio_median']:.2f}x   p99 {result['ratio_p99']:.2f}x   (n={result['n']})")
