"""L2: many open event streams on one host. n people each open their conversation's event stream
(`GET /api/conversations/{id}/events`, Server-Sent Events) and keep it open for `--hold` seconds,
the web in production shape (gunicorn `-k gthread` or `-k gevent`, Redis, SQLite file or
PostgreSQL); one asyncio client holds every connection.

    python bench/streams.py [--n 1000] [--hold 30] [--worker-class gthread|gevent] [--workers 2]
                            [--threads 640] [--connections N] [--database-url URL]
                            [--redis redis://127.0.0.1:6379/11] [--smoke] [--json]

Measured: the memory (RSS and PSS, from /proc/<pid>/smaps_rollup) of the web processes (gunicorn
master + workers) after a warm-up and with every stream open, the difference ÷ n (memory per
stream); their threads; their CPU time while the streams are held (idle streams: a keep-alive
every EVENTS_HEARTBEAT s); `GET /login` every 100 ms from a process of its own
(bench/_login_probe.py), idle and while the streams are open; how long opening them all took;
streams refused or broken (failures); the Redis server's clients and memory; the load average.
To show the streams are live, one event is then published to every conversation (the app's
events.publish) and each open stream must deliver it (`delivered`, and how long that took). No
turn worker is needed (nothing runs a turn).

--smoke: 100 streams held 3 s (shows the benchmark works; figures not meaningful).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from _aio import EventStream, raise_open_files
from _harness import (
    LoginProbe,
    cpu_seconds,
    env_for,
    flush_redis,
    load_average,
    memory_of,
    redis_figures,
    seed_people,
    temp_sqlite,
    threads_of,
    web,
)

OPEN_AT_ONCE = 100  # connections being opened at a time (a crowd arriving, not a SYN flood)


async def hold(port: int, people: list[tuple[str, int]], seconds: float, during: Any) -> dict[str, Any]:
    """Open every stream (OPEN_AT_ONCE at a time), call `during()` (in a thread) while they are
    held for `seconds`, then close them; what happened to each."""
    raise_open_files(len(people) + 512)
    gate = asyncio.Semaphore(OPEN_AT_ONCE)
    outcome: list[dict[str, Any]] = [{} for _ in people]
    streams: list[EventStream | None] = [None] * len(people)
    opened_all = asyncio.Event()
    open_count = 0

    async def one(i: int, token: str, convo: int) -> None:
        nonlocal open_count
        out = outcome[i]
        try:
            async with gate:
                start = time.monotonic()
                stream = await asyncio.wait_for(
                    EventStream.open(port, f"/api/conversations/{convo}/events", {"Authorization": f"Bearer {token}"}), 60
                )
                streams[i] = stream
                first = await asyncio.wait_for(stream.next_event(), 60)
                if first is None:
                    raise ConnectionError("stream ended at once")
                out["open_s"] = time.monotonic() - start
            open_count += 1
            if open_count == len(people):
                opened_all.set()
            while (got := await stream.next_event()) is not None:
                at, event = got
                if event.get("event") == "text":
                    out["delivered"] = True
                elif "comment" in event:
                    out["keepalives"] = out.get("keepalives", 0) + 1
            out["ended"] = time.monotonic()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            out["error"], out["ended"] = type(exc).__name__, time.monotonic()
            if "open_s" in out:  # counted as open already
                return
            open_count += 1
            if open_count == len(people):
                opened_all.set()

    started = time.monotonic()
    tasks = [asyncio.create_task(one(i, token, convo)) for i, (token, convo) in enumerate(people)]
    try:
        await asyncio.wait_for(opened_all.wait(), 120)
    except TimeoutError:
        pass
    opened_s = time.monotonic() - started
    open_now = sum(s is not None and "error" not in o for s, o in zip(streams, outcome, strict=True))
    held_from = time.monotonic()
    figures = await asyncio.to_thread(during, seconds)
    held_until = time.monotonic()
    deadline = held_until + 10  # the event published at the end reaches every open stream
    while time.monotonic() < deadline and sum(bool(o.get("delivered")) for o in outcome) < open_now:
        await asyncio.sleep(0.05)
    figures["delivery_s"] = time.monotonic() - held_until
    for stream in streams:
        if stream is not None:
            stream.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # open at the end of the hold: opened, and neither ended nor broken before it
    lasted = sum(1 for o in outcome if "open_s" in o and not ("ended" in o and o["ended"] < held_until))
    broken = sum(1 for o in outcome if "open_s" in o and "ended" in o and o["ended"] < held_until)
    errors: dict[str, int] = {}
    for o in outcome:
        if "error" in o:
            errors[o["error"]] = errors.get(o["error"], 0) + 1
    return {
        "opened_s": opened_s,
        "open": open_now,
        "lasted": lasted,
        "held_s": held_until - held_from,
        "broken": broken,
        "errors": errors,
        "delivered": sum(bool(o.get("delivered")) for o in outcome),
        "open_times": sorted(o["open_s"] for o in outcome if "open_s" in o),
        **figures,
    }


def run(
    n: int,
    hold_s: float,
    database_url: str,
    redis_url: str,
    idle: float,
    worker_class: str,
    workers: int,
    threads: int,
    connections: int | None,
) -> dict[str, Any]:
    flush_redis(redis_url)
    env = env_for(database_url, REDIS_URL=redis_url)
    people = seed_people(env, n, "bench-l2", fresh=True)
    publish_to = publisher(env)
    with web(env, worker_class, workers, threads, connections) as server:
        asyncio.run(warm_up(server.port, people[:16]))
        # A stream its client closed holds its server thread and Redis connection until its next
        # write (a keep-alive, EVENTS_HEARTBEAT s): one event to each ends the warm-up's at once.
        publish_to([c for _, c in people[:16]])
        time.sleep(0.5)
        processes = server.pids()
        before = {**memory_of(processes), "threads": threads_of(processes)}
        probe = LoginProbe(server.port)
        idle_login = probe.sample(idle)
        redis_before = redis_figures(redis_url)

        def during(seconds: float) -> dict[str, Any]:
            """While every stream is open: the /login probe, CPU and memory; then one event to each."""
            probe.start()
            cpu = cpu_seconds(processes)
            load = load_average()
            time.sleep(seconds)
            figures = {
                "cpu_s": cpu_seconds(processes) - cpu,
                "load_average": [load, load_average()],
                "memory": {**memory_of(server.pids()), "threads": threads_of(server.pids())},
                "redis": redis_figures(redis_url),
                "login": probe.finish(),
            }
            publish_to([c for _, c in people])
            return figures

        held = asyncio.run(hold(server.port, people, hold_s, during))
    memory = held.pop("memory")
    opened = held.pop("open_times")
    idle_p99, run_p99 = idle_login.get("p99_ms"), held["login"].get("p99_ms")
    failures = n - held["lasted"]
    return {
        "bench": "L2",
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": n,
        "web": server.shape,
        "worker_class": worker_class,
        **held,
        "failures": failures,
        "open_p99_ms": opened[min(len(opened) - 1, int(round(0.99 * (len(opened) - 1))))] * 1000 if opened else None,
        "memory": {
            "before": before,
            "open": memory,
            "per_stream_rss_kb": (memory["rss_mb"] - before["rss_mb"]) * 1024 / n,
            "per_stream_pss_kb": (memory["pss_mb"] - before["pss_mb"]) * 1024 / n,
        },
        "redis_before": redis_before,
        "login": {"idle": idle_login, "open": held["login"], "ratio_p99": run_p99 / idle_p99 if idle_p99 and run_p99 else None},
        "cpu_per_s": held["cpu_s"] / held["held_s"] if held["held_s"] else None,
    }


def publisher(env: dict[str, str]) -> Any:
    """A function that appends one `text` event to each conversation's stream, the app's own way
    (app.copilot.events.publish, in this process: the app is made here before anything is timed)."""
    import os

    os.environ.update(env)
    from app import create_app
    from app.copilot import events

    app = create_app({"SWEEP_ON_START": False})

    def publish(conversations: list[int]) -> None:
        with app.app_context():
            for convo in conversations:
                events.publish(convo, "text", run=0, step=0, text="ping")

    return publish


async def warm_up(port: int, people: list[tuple[str, int]]) -> None:
    """First requests in every worker: streams opened and closed, sign-in pages."""
    from _aio import request

    for _ in range(3):

        async def one(token: str, convo: int) -> None:
            stream = await EventStream.open(port, f"/api/conversations/{convo}/events", {"Authorization": f"Bearer {token}"})
            await stream.next_event()
            stream.close()
            await request(port, "GET", "/login")

        await asyncio.gather(*(one(token, convo) for token, convo in people))


def show(r: dict[str, Any]) -> None:
    m, login = r["memory"], r["login"]
    print(f"L2 open event streams: {r['n']} held {r['held_s']:.0f} s ({r['database']}, {r['web']}, Redis)")
    print(
        f"  opened             {r['open']} of {r['n']} in {r['opened_s']:.1f} s (p99 {r['open_p99_ms']:.0f} ms each), "
        f"{r['lasted']} still open at the end; failures {r['failures']} (errors {r['errors'] or 0}, "
        f"broken after opening {r['broken']}); the event reached {r['delivered']} within {r['delivery_s']:.2f} s"
    )
    print(
        f"  web memory         before RSS {m['before']['rss_mb']:.0f} MB PSS {m['before']['pss_mb']:.0f} MB "
        f"({m['before']['threads']} threads) → open RSS {m['open']['rss_mb']:.0f} MB PSS {m['open']['pss_mb']:.0f} MB "
        f"({m['open']['threads']} threads)"
    )
    print(f"  per stream         RSS {m['per_stream_rss_kb']:.1f} KB   PSS {m['per_stream_pss_kb']:.1f} KB")
    for name in ("idle", "open"):
        s = login[name]
        print(
            f"  GET /login {name:<5}   p50 {s.get('p50_ms', 0):.1f} ms  p99 {s.get('p99_ms', 0):.1f} ms  "
            f"max {s.get('max_ms', 0):.1f} ms  (n={s['n']}, failed {s['failed']})"
        )
    print(f"  /login p99 ratio   {login['ratio_p99']:.2f}x" if login["ratio_p99"] else "  /login p99 ratio   -")
    print(f"  web CPU held       {r['cpu_s']:.2f} s over {r['held_s']:.0f} s ({100 * r['cpu_per_s']:.1f}% of a core)")
    print(
        f"  Redis server       {r['redis_before']['clients']} → {r['redis']['clients']} clients, used_memory "
        f"{r['redis_before']['used_memory_mb']:.1f} → {r['redis']['used_memory_mb']:.1f} MB; "
        f"load average {r['load_average']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=30.0, help="seconds every stream is held open")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle /login samples")
    parser.add_argument("--database-url", "--pg", dest="database_url", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--worker-class", default="gthread", choices=("gthread", "gevent"))
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=640, help="threads per gthread worker")
    parser.add_argument(
        "--connections", type=int, default=None, help="connections per worker (gthread: its threads; gevent: 1000)"
    )
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.hold, args.idle = min(args.n, 100), 3.0, 2.0
    result = run(
        args.n,
        args.hold,
        args.database_url or temp_sqlite(),
        args.redis,
        args.idle,
        args.worker_class,
        args.workers,
        args.threads,
        args.connections,
    )
    if not args.json:
        show(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
