"""P1: what a person waits for when they send a message or answer a card, the browser's way
(`Prefer: respond-async`: the answer comes once the message is kept and its turn queued, or once
the card is decided — verify, claim, authorize, rebuild, handle() — and its continuation queued),
each against a one-INSERT endpoint of the same app (BENCH_PROBE, app/api/probe.py) with the same
authentication, alternating A/B request by request on one keep-alive connection, in one run. The
app is in production shape: gunicorn (`-k gthread` by default), `flask --app wsgi worker` running
the turns (the offline model) over Redis, SQLite file or PostgreSQL.

    python bench/confirm_roundtrip.py [--n 200] [--database-url URL] [--redis redis://127.0.0.1:6379/11]
                                      [--worker-class gthread|gevent] [--json]

First n messages `/delete_post post=<id>` (each in a new conversation, each asking for a card)
alternate with n INSERTs; once the worker has posted every card, n confirms alternate with n
INSERTs. Medians and p99s of each side, and the ratios: confirm ÷ INSERT, message ÷ INSERT.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _harness import (
    Client,
    env_for,
    flush_redis,
    load_average,
    prepare,
    seed_posts,
    summary,
    temp_sqlite,
    turn_worker,
    web,
)

ASYNC = {"Prefer": "respond-async"}


def alternate(client: Client, calls: list[Any]) -> tuple[list[float], list[float], list[Any]]:
    """For each call, one INSERT and the call, in alternating order; their times and the calls' bodies."""
    baseline, candidate, bodies = [], [], []
    for i, call in enumerate(calls):
        for which in ("probe", "call") if i % 2 == 0 else ("call", "probe"):
            if which == "probe":
                status, body, t = client.post("/api/_probe/insert")
                baseline.append(t)
                assert status == 200, (status, body)
            else:
                status, body, t = call()
                candidate.append(t)
                bodies.append(body)
    return baseline, candidate, bodies


def cards(client: Client, conversations: list[int], seconds: float = 120) -> list[dict[str, Any]]:
    """Each conversation's pending card, once the worker has posted it."""
    found: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + seconds
    while len(found) < len(conversations) and time.monotonic() < deadline:
        for convo in conversations:
            if convo not in found:
                _, body, _ = client.get(f"/api/conversations/{convo}")
                if body.get("pending"):
                    found[convo] = body["pending"][0]
        if len(found) < len(conversations):
            time.sleep(0.2)
    missing = [c for c in conversations if c not in found]
    if missing:
        raise RuntimeError(f"no card after {seconds} s in {len(missing)} conversations (is the turn worker running?)")
    return [found[c] for c in conversations]


def run(n: int, database_url: str, redis_url: str, worker_class: str) -> dict[str, Any]:
    flush_redis(redis_url)
    # n cards pending at once for one person: past the per-person cap (20) that guards against floods
    env = env_for(database_url, REDIS_URL=redis_url, APPROVALS_MAX_PENDING_PER_PERSON=str(2 * n + 50))
    token = prepare(database_url, env)
    warm_n = min(20, max(5, n // 4))
    posts = seed_posts(env, n + warm_n)
    with web(env, worker_class, workers=2, threads=8, connections=16) as server, turn_worker(env, threads=8):
        client = Client(server.port, token)
        # Warm up every path in both web workers and the turn worker (first imports and connections).
        warm = [client.post("/api/conversations")[1]["id"] for _ in range(warm_n)]
        for convo, post in zip(warm, posts[n:], strict=True):
            client.post("/api/_probe/insert")
            client.post(f"/api/conversations/{convo}/messages", {"text": f"/delete_post post={post}"}, ASYNC)
        for card in cards(client, warm):
            client.post(f"/api/approvals/{card['id']}/confirm", {"token": card["token"]}, ASYNC)
        conversations = [client.post("/api/conversations")[1]["id"] for _ in range(n)]  # not timed
        load = [load_average()]

        def message(convo: int, post: int) -> Any:
            return lambda: client.post(f"/api/conversations/{convo}/messages", {"text": f"/delete_post post={post}"}, ASYNC)

        insert_m, sent, replies = alternate(client, [message(c, p) for c, p in zip(conversations, posts[:n], strict=True)])
        assert all("run" in r for r in replies), replies[:3]
        prompts = cards(client, conversations)

        def confirm(card: dict[str, Any]) -> Any:
            return lambda: client.post(f"/api/approvals/{card['id']}/confirm", {"token": card["token"]}, ASYNC)

        insert_c, confirmed, answers = alternate(client, [confirm(card) for card in prompts])
        refused = [a for a in answers if a.get("status") != "done" or "run" not in a]
        assert not refused, refused[:3]
        load.append(load_average())
    database = "postgresql" if database_url.startswith("postgres") else "sqlite"
    figures = {
        "insert": summary(insert_c),
        "confirm": summary(confirmed),
        "message_insert": summary(insert_m),
        "message": summary(sent),
    }
    return {
        "database": database,
        "n": n,
        "web": server.shape,
        **figures,
        "ratio_median": figures["confirm"]["median_ms"] / figures["insert"]["median_ms"],
        "ratio_p99": figures["confirm"]["p99_ms"] / figures["insert"]["p99_ms"],
        "message_ratio_median": figures["message"]["median_ms"] / figures["message_insert"]["median_ms"],
        "message_ratio_p99": figures["message"]["p99_ms"] / figures["message_insert"]["p99_ms"],
        "load_average": load,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--database-url", "--pg", dest="database_url", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--worker-class", default="gthread", choices=("gthread", "gevent"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = run(args.n, args.database_url or temp_sqlite(), args.redis, args.worker_class)
    if args.json:
        print(json.dumps(r))
        return
    print(f"P1 with Prefer: respond-async vs one INSERT ({r['database']}, n={r['n']}, {r['web']}, worker, Redis)")
    for name, label in (("message_insert", "INSERT"), ("message", "message"), ("insert", "INSERT"), ("confirm", "confirm")):
        s = r[name]
        print(f"  {label:<10} median {s['median_ms']:.2f} ms   p99 {s['p99_ms']:.2f} ms")
    print(f"  message ÷ INSERT  median {r['message_ratio_median']:.2f}x   p99 {r['message_ratio_p99']:.2f}x")
    print(f"  confirm ÷ INSERT  median {r['ratio_median']:.2f}x   p99 {r['ratio_p99']:.2f}x")
    print(f"  load average {r['load_average']}")


if __name__ == "__main__":
    main()
