"""`GET /login` (or `--path`) every `--every` seconds on 127.0.0.1:PORT, each on a new connection in a thread of
its own (open loop: a stalled server meets as many probes as a person reloading would send), until
a line on standard input (or its end: the benchmark is gone) or `--limit` seconds; then it waits
up to 60 s for the probes still out and prints their figures as one JSON line. A failed probe
counts at the time it gave up; one not back in time counts as failed and is left out of the times.

    python bench/_login_probe.py PORT [--every 0.1] [--limit 600] [--path /login]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time

TIMEOUT = 60.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--every", type=float, default=0.1)
    parser.add_argument("--limit", type=float, default=600.0)
    parser.add_argument("--path", default="/login")
    args = parser.parse_args()
    samples: list[float] = []
    failed = 0
    lock = threading.Lock()
    stop = threading.Event()

    def one() -> None:
        nonlocal failed
        start = time.perf_counter()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=TIMEOUT)
            conn.request("GET", args.path)
            response = conn.getresponse()
            response.read()
            conn.close()
            ok = response.status == 200
        except OSError:
            ok = False
        with lock:
            samples.append(time.perf_counter() - start)
            failed += not ok

    def until_told() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=until_told, daemon=True).start()
    threads: list[threading.Thread] = []
    started = next_at = time.monotonic()
    while not stop.is_set() and time.monotonic() - started < args.limit:
        thread = threading.Thread(target=one, daemon=True)
        thread.start()
        threads.append(thread)
        next_at += args.every
        stop.wait(max(0.0, next_at - time.monotonic()))
    deadline = time.monotonic() + TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        unfinished = sum(t.is_alive() for t in threads)
        ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000

    figures: dict[str, float] = {"n": len(ordered), "sent": len(threads), "failed": failed + unfinished}
    if ordered:
        figures.update(p50_ms=rank(0.5), p95_ms=rank(0.95), p99_ms=rank(0.99), max_ms=ordered[-1] * 1000)
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
