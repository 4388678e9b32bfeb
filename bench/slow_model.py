"""L1 load: n people each send one message at once while the model streams its answer over
`--seconds`, the app in production shape: gunicorn serving the web (`-k gthread` or `-k gevent`),
`flask --app wsgi worker` running the turns (Dramatiq over Redis), SQLite file or PostgreSQL, rate
limits off; the model a local fake OpenAI-compatible server (bench/fake_model.py) that streams its
words evenly over those seconds and stamps each chunk it sends on CLOCK_MONOTONIC.

    python bench/slow_model.py [--n 200] [--seconds 2] [--database-url URL | --pg URL]
                               [--redis redis://127.0.0.1:6379/10] [--worker-class gthread|gevent]
                               [--workers 2] [--threads 256] [--worker-threads 256] [--worker-processes <cores>]
                               [--stream-after] [--limit 60] [--smoke] [--json]

Each person does what the browser does: their conversation's event stream
(`GET /api/conversations/{id}/events`) is open first (as the page's EventSource is before anyone
types; `--stream-after` opens it right after the POST instead, from the `events` URL the 202
gives), then `POST /api/conversations/{id}/messages` with `Prefer: respond-async` (202 at once),
then the stream is read until the `turn` event that ends their run.

Measured: the turn's end (from the POST's start to reading its end event; a turn not ended within
`--limit` counts at the limit); failures (a POST not 202, a stream that broke or ended early, an
end other than `done`, a reply without the model's words, a turn not ended in time); the first
streamed words' delay, from the fake sending its first word (its own monotonic record) to the
client reading that text on its stream; the POST's own time; `GET /login` every 100 ms from a
process of its own (bench/_login_probe.py), idle and during the run; the most model requests in
flight at once (the fake's count); RSS and PSS of every process (gunicorn master + workers, the
turn worker, Redis (the whole server), the fake; PostgreSQL's backends for this database, or the
SQLite file's size) before, at peak and after; their CPU time during the run; the load average.
Everything is on 127.0.0.1 and stops by itself.

--smoke: 20 people, 0.5 s, 1 s of idle samples, 8 s for the turns (shows the benchmark still works;
figures not meaningful).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from _aio import EventStream, raise_open_files, request
from _harness import (
    Client,
    LoginProbe,
    asgi,
    cpu_seconds,
    database_figures,
    die_with_parent,
    env_for,
    flush_redis,
    load_average,
    memory_of,
    percentiles,
    redis_figures,
    redis_pid,
    seed_people,
    stop,
    temp_sqlite,
    turn_worker,
    web,
)

HERE = Path(__file__).resolve().parent
REPLY = re.compile(r"Reply-(\d+)")
ENDS = ("done", "paused", "failed", "stopped", "interrupted")
# time.monotonic() - time.time(): an event's id is the Redis server's clock (ms since the epoch)
# when it was appended, so this places each event's publishing on the monotonic timeline.
MONOTONIC_MINUS_WALL = time.monotonic() - time.time()


def published(event: dict[str, str]) -> float | None:
    """When the event was appended to the conversation's stream (monotonic seconds; ms resolution)."""
    ms, _, _ = event.get("id", "").partition("-")
    return int(ms) / 1000 + MONOTONIC_MINUS_WALL if ms.isdigit() else None


@contextmanager
def fake_model(seconds: float, words: int) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """bench/fake_model.py in a process of its own; yields its base URL and the process."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_model.py"), "--seconds", str(seconds), "--words", str(words)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def env_with_fake(database_url: str, redis_url: str, base_url: str) -> dict[str, str]:
    """The app's environment with the fake as its model."""
    return env_for(
        database_url,
        REDIS_URL=redis_url,
        COUNTERSIGN_MODEL="openai:fake",
        COUNTERSIGN_MODEL_BASE_URL=f"{base_url}/v1",
        COUNTERSIGN_MODEL_API_KEY="bench",
    )


def fake_stats(base_url: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection(base_url.removeprefix("http://"), timeout=30)
    conn.request("GET", "/_stats")
    return json.loads(conn.getresponse().read())  # type: ignore[no-any-return]


class Processes:
    """Every process of the run, by role, for memory and CPU."""

    def __init__(
        self,
        server: Any,
        workers: list[subprocess.Popen[bytes]],
        fake: subprocess.Popen[str],
        redis_url: str,
        database_url: str,
        turns: Any = None,
    ) -> None:
        self.server, self.workers, self.fake, self.turns = server, workers, fake, turns
        self.redis_url, self.database_url = redis_url, database_url

    def roles(self) -> dict[str, list[int]]:
        from _harness import children

        return {
            "web": self.server.pids(),
            "worker": [pid for w in self.workers for pid in [w.pid, *children(w.pid)]],
            **({"asgi": self.turns.pids()} if self.turns is not None else {}),
            "fake": [self.fake.pid],
        }

    def memory(self, database: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {role: memory_of(pids) for role, pids in self.roles().items()}
        out["redis"] = redis_figures(self.redis_url)
        if database:
            out["database"] = database_figures(self.database_url)
        return out

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by each role, by the Redis server (when it runs here) and by
        this benchmark's own clients (the people, their streams; the machine's third user of CPU)."""
        out = {role: cpu_seconds(pids) for role, pids in self.roles().items()}
        out["redis"] = cpu_seconds([redis_pid(self.redis_url)])
        out["clients"] = cpu_seconds([os.getpid()])
        return out


class Peak:
    """Samples the memory of the run's processes every 0.5 s in a thread; keeps each role's peak."""

    def __init__(self, processes: Processes) -> None:
        self.processes = processes
        self.peak: dict[str, Any] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            now = self.processes.memory()
            for role, figures in now.items():
                if figures.get("rss_mb", 0) >= self.peak.get(role, {}).get("rss_mb", -1):
                    self.peak[role] = figures
            self.stop.wait(0.5)

    def __enter__(self) -> Peak:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.thread.join()


def warm_up(port: int, token: str, width: int = 8, rounds: int = 3, ready_s: float = 300.0) -> None:
    """First imports and connections in every web worker and in the turn worker: instant turns
    ("[warm]", answered at once by the fake) waited for as a plain POST waits, sign-in pages, and
    event streams opened and closed. Raises when a turn is not answered (no worker running?)."""
    client = Client(port, token)
    convos = [client.post("/api/conversations")[1]["id"] for _ in range(width)]
    problems: list[str] = []

    def turn(convo: int) -> None:
        client = Client(port, token)
        status, body, _ = client.post(f"/api/conversations/{convo}/messages", {"text": "[warm] hello"})
        # A turn still going after the POST's wait (202, or a 500 when the wait broke: on a loaded
        # machine the worker may still be starting) is waited for on the conversation, up to
        # `ready_s`, before the run is measured.
        deadline = time.monotonic() + ready_s
        while status != 200 and time.monotonic() < deadline:
            time.sleep(1)
            _, got, _ = client.get(f"/api/conversations/{convo}")
            if any(m.get("role") == "assistant" for m in got.get("messages", [])):
                status, body = 200, got
        if status != 200 or not any(m.get("role") == "assistant" for m in body.get("messages", [])):
            problems.append(f"{status} {body}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/login")
        conn.getresponse().read()

    async def streams() -> None:
        for convo in convos[:4]:  # (a person may hold EVENTS_MAX_STREAMS_PER_PERSON streams at once)
            stream = await EventStream.open(port, f"/api/conversations/{convo}/events", {"Authorization": f"Bearer {token}"})
            await stream.next_event()
            stream.close()

    for _ in range(rounds):
        # Streams first: a closed stream holds its server thread and Redis connection until its
        # next write, and the turns that follow write to every one of them.
        asyncio.run(streams())
        threads = [threading.Thread(target=turn, args=(c,)) for c in convos]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if problems:
        raise RuntimeError(f"warm-up turns not answered (is the turn worker running?): {problems[:3]}")


async def person(
    port: int,
    token: str,
    convo: int,
    i: int,
    stream_first: bool,
    ready: asyncio.Event,
    go: asyncio.Event,
    out: dict[str, Any],
    streamed: int = 0,
    text: str = "",
) -> None:
    """One person's turn, the browser's way (or, with `streamed`, the ASGI server's port, an API
    client's: one POST with `Accept: text/event-stream`, answered with the turn's events, as the
    peer's clients do); fills `out` with what happened and when."""
    headers = {"Authorization": f"Bearer {token}"}
    said = {"text": text or f"Hello from person-{i}: what can you do for me today?"}
    stream: EventStream | None = None
    try:
        if stream_first and not streamed:
            stream = await EventStream.open(port, f"/api/conversations/{convo}/events", headers)
            await stream.next_event()  # "retry: …": the stream is established
        out["ready"] = True
        ready.set()
        await go.wait()
        out["start"] = time.monotonic()
        if streamed:
            stream = await EventStream.open(streamed, f"/api/conversations/{convo}/messages", headers, "POST", said)
        else:
            path, asked = f"/api/conversations/{convo}/messages", {**headers, "Prefer": "respond-async"}
            status, _, body = await request(port, "POST", path, asked, said)
            if status != 202 or not isinstance(body, dict) or "run" not in body:
                out["error"] = f"http_{status}"
                return
            out["run"] = body["run"]
            stream = stream or await EventStream.open(port, body["events"], headers)
        out["posted"] = time.monotonic()
        while (got := await stream.next_event()) is not None:
            if _noted(out, *got):
                return
        out["error"] = "stream_ended"
    except asyncio.CancelledError:
        out["error"] = "timeout"
        raise
    except Exception as exc:  # a refused or reset connection, a bad response
        out["error"] = type(exc).__name__
    finally:
        if stream is not None:
            stream.close()


def _noted(out: dict[str, Any], at: float, event: dict[str, str]) -> bool:
    """Note what an event tells of the person's turn (its run: the POST's, or else the first that
    starts); True at its end."""
    kind = event.get("event")
    if kind == "text" and "first" not in out:
        match = REPLY.search(json.loads(event.get("data") or "{}").get("text", ""))
        if match:
            out["first"], out["request"] = at, int(match.group(1))
            out["first_published"] = published(event)
    elif kind == "turn":
        data = json.loads(event.get("data") or "{}")
        if out.get("run") is None and data.get("state") == "started":
            out["run"] = data.get("run")
        if data.get("run") != out.get("run"):
            return False
        if data.get("state") == "started" and "started" not in out:
            out["started"] = published(event)
        elif data.get("state") in ENDS:
            out["end"], out["state"], out["end_published"] = at, data["state"], published(event)
            out["replied"] = any(REPLY.search(m.get("text") or "") for m in data.get("messages") or [])
            return True
    return False


def warm_streamed(web_port: int, port: int, token: str, width: int = 8, rounds: int = 3) -> None:
    """First imports and connections in every ASGI process: instant streamed turns ("[warm]")."""
    client = Client(web_port, token)
    convos = [client.post("/api/conversations")[1]["id"] for _ in range(width)]

    async def some() -> list[dict[str, Any]]:
        go, outs = asyncio.Event(), [{} for _ in convos]
        go.set()
        await asyncio.gather(
            *(
                person(web_port, token, c, i, False, asyncio.Event(), go, outs[i], port, "[warm] hello")
                for i, c in enumerate(convos)
            )
        )
        return outs

    for _ in range(rounds):
        bad = [o for o in asyncio.run(some()) if o.get("state") != "done"]
        if bad:
            raise RuntimeError(f"warm-up streamed turns not answered: {bad[:3]}")


async def storm(
    port: int, people: list[tuple[str, int]], stream_first: bool, limit: float, probe: LoginProbe, streamed: int = 0
) -> dict[str, Any]:
    """Every stream open (when first), then everyone sends at once; each turn's outcome. With
    `streamed` (the ASGI server's port), each sends there and reads their turn from the answer."""
    raise_open_files(4 * len(people) + 256)
    go = asyncio.Event()
    turns: list[dict[str, Any]] = [{"person": i} for i in range(len(people))]
    readies = [asyncio.Event() for _ in people]
    tasks = [
        asyncio.create_task(person(port, token, convo, i, stream_first, readies[i], go, turns[i], streamed))
        for i, (token, convo) in enumerate(people)
    ]
    opening = time.monotonic()
    await asyncio.wait([asyncio.create_task(r.wait()) for r in readies], timeout=60)
    opened = time.monotonic() - opening
    await asyncio.sleep(0.5)
    probe.start()
    started = time.monotonic()
    go.set()
    _, late = await asyncio.wait(tasks, timeout=limit)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    ended = time.monotonic()
    return {
        "turns": turns,
        "started": started,
        "ended": ended,
        "opened_s": opened,
        "streams_open": sum(bool(t.get("ready")) for t in turns),
    }


def failures(turns: list[dict[str, Any]]) -> dict[str, int]:
    """Each turn that did not end answered, by kind."""
    counts: dict[str, int] = {}
    for turn in turns:
        kind = (
            turn.get("error")
            or (f"state_{turn['state']}" if turn.get("state") not in (None, "done") else None)
            or ("no_reply" if "end" in turn and not turn.get("replied") else None)
            or (None if "end" in turn else "unfinished")
        )
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return {"total": sum(counts.values()), **counts}


def model_figures(turns: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    """From the fake's log: each ended turn's wait before its model request arrived and after the
    model's last word; the most model requests in flight at once."""
    records = [r for r in stats["requests"] if r["person"] is not None and r["sent"]]
    by_person: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_person.setdefault(r["person"], []).append(r)
    before, after = [], []
    for turn in turns:
        mine = by_person.get(turn["person"])
        if mine and "end" in turn and "start" in turn:
            before.append(min(r["arrived"] for r in mine) - turn["start"])
            after.append(turn["end"] - max(r["sent"][-1] for r in mine))
    edges = sorted([(r["arrived"], 1) for r in records] + [(r["sent"][-1], -1) for r in records])
    level = most = 0
    for _, step in edges:
        level += step
        most = max(most, level)
    return {
        "requests": len(records),
        "streamed": sum(r["stream"] for r in records),
        "max_in_flight": most,
        "wait_before_model": percentiles(before),
        "after_model": percentiles(after),
    }


def first_words_figures(turns: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    """The fake sent a request's first words → the person's stream delivered them; and its two
    parts: the fake sent → the worker appended them to the stream, → the web delivered them."""
    sent = {r["n"]: r["sent"][0] for r in stats["requests"] if r["sent"]}
    mine = [t for t in turns if "first" in t and t["request"] in sent]
    delays = [t["first"] - sent[t["request"]] for t in mine]
    worker = [t["first_published"] - sent[t["request"]] for t in mine if t.get("first_published")]
    web_part = [t["first"] - t["first_published"] for t in mine if t.get("first_published")]
    return {
        **percentiles(delays),
        "missing": len(turns) - len(delays),
        "to_stream": percentiles(worker),
        "stream_to_client": percentiles(web_part),
    }


def segments(turns: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Where each ended turn's time went: the POST; its 202 → the worker started the pass (the
    `turn started` event); → the model request arrived at the fake; the model's answer (first
    request's arrival → last word of the last request); → the worker appended the turn's end;
    → the client read it."""
    by_person: dict[int, list[dict[str, Any]]] = {}
    for r in stats["requests"]:
        if r["person"] is not None and r["sent"]:
            by_person.setdefault(r["person"], []).append(r)
    parts: dict[str, list[float]] = {k: [] for k in ("post", "queued", "to_model", "model", "to_end", "end_to_client")}
    for t in turns:
        mine = by_person.get(t["person"])
        if not (mine and "end" in t and t.get("started") and t.get("end_published") and "posted" in t):
            continue
        arrived, last = min(r["arrived"] for r in mine), max(r["sent"][-1] for r in mine)
        parts["post"].append(t["posted"] - t["start"])
        parts["queued"].append(t["started"] - t["posted"])
        parts["to_model"].append(arrived - t["started"])
        parts["model"].append(last - arrived)
        parts["to_end"].append(t["end_published"] - last)
        parts["end_to_client"].append(t["end"] - t["end_published"])
    return {k: percentiles(v) for k, v in parts.items()}


class Phases:
    """How long each part of the benchmark took (setup, measuring, stopping)."""

    def __init__(self) -> None:
        self.at = time.monotonic()
        self.phases: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self.at, 2)
        self.at = now


def run(
    n: int,
    seconds: float,
    words: int,
    database_url: str,
    redis_url: str,
    idle: float,
    limit: float,
    worker_class: str,
    workers: int,
    threads: int,
    worker_threads: int,
    stream_first: bool,
    warm_rounds: int = 3,
    worker_processes: int = 1,
    asgi_workers: int = 0,
) -> dict[str, Any]:
    clock = Phases()
    flush_redis(redis_url)
    with fake_model(seconds, words) as (base_url, fake):
        env = env_with_fake(database_url, redis_url, base_url)
        people = seed_people(env, n + 1, "bench-l1", fresh=True)
        warm_token = people.pop()[0]  # a person of their own for the warm-up turns
        clock.mark("prepare")
        with web(env, worker_class, workers, threads) as server, ExitStack() as stack:
            turn_workers = [stack.enter_context(turn_worker(env, worker_threads)) for _ in range(worker_processes)]
            turns = stack.enter_context(asgi(env, asgi_workers)) if asgi_workers else None
            warm_up(server.port, warm_token, rounds=warm_rounds)
            if turns is not None:
                warm_streamed(server.port, turns.port, warm_token, rounds=warm_rounds)
            clock.mark("start_and_warm_up")
            processes = Processes(server, turn_workers, fake, redis_url, database_url, turns)
            before = processes.memory(database=True)
            probe = LoginProbe(server.port)
            idle_login = probe.sample(idle)
            load_before = load_average()
            cpu_before = processes.cpu()
            with Peak(processes) as peak:
                out = asyncio.run(storm(server.port, people, stream_first, limit, probe, turns.port if turns else 0))
                during_login = probe.finish()
            cpu_after = processes.cpu()
            after = processes.memory(database=True)
            stats = fake_stats(base_url)
            workers_alive = sum(w.poll() is None for w in turn_workers)
            clock.mark("measure")
            stop(server.proc, *turn_workers, *([turns.proc] if turns else []), seconds=5)  # (a turn is not waited for)
    clock.mark("stop")
    turns = out["turns"]
    run_s = out["ended"] - out["started"]
    result: dict[str, Any] = {
        "bench": "L1",
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": n,
        "model_seconds": seconds,
        "words": words,
        "web": server.shape,
        "worker_threads": worker_threads,
        "worker_processes": worker_processes,
        "stream": "the POST's own answer (uvicorn asgi:app)"
        if asgi_workers
        else "opened before the POST"
        if stream_first
        else "opened right after the POST",
        "asgi_workers": asgi_workers,
        "streams_open_before_send": out["streams_open"],
        "streams_opened_s": out["opened_s"],
        "turn": percentiles(
            [min(t.get("end", out["started"] + limit), out["started"] + limit) - t["start"] for t in turns if "start" in t]
        ),
        "post": percentiles([t["posted"] - t["start"] for t in turns if "posted" in t]),
        "all_ended_s": run_s,
        "failures": failures(turns),
        "turns_ok": sum(t.get("state") == "done" and bool(t.get("replied")) for t in turns),
        "first_words": first_words_figures(turns, stats),
        "segments": segments(turns, stats),
        "model": model_figures(turns, stats),
        "login": {"idle": idle_login, "run": during_login},
        "memory": {"before": before, "peak": peak.peak, "after": after},
        "cpu_s": {role: cpu_after[role] - cpu_before.get(role, 0.0) for role in cpu_after},
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "worker_processes_alive": workers_alive,
        "phases_s": clock.phases,
    }
    idle_p99, run_p99 = idle_login.get("p99_ms"), during_login.get("p99_ms")
    result["login"]["ratio_p99"] = run_p99 / idle_p99 if idle_p99 and run_p99 else None
    return result


def _ms(figures: dict[str, Any], keys: tuple[str, ...] = ("p50", "p95", "p99", "max")) -> str:
    if not figures.get("n"):
        return "no samples"
    return "  ".join(f"{k} {figures[f'{k}_ms']:7.1f} ms" for k in keys) + f"   (n={figures['n']})"


def _mem(figures: dict[str, Any]) -> str:
    return f"RSS {figures.get('rss_mb', 0):6.0f} MB  PSS {figures.get('pss_mb', 0):6.0f} MB"


def show(r: dict[str, Any]) -> None:
    f, m, login, mem = r["failures"], r["model"], r["login"], r["memory"]
    print(
        f"L1 load: {r['n']} people at once, model {r['model_seconds']} s over {r['words']} words "
        f"({r['database']}, {r['web']}, {r['worker_processes']} × worker --threads {r['worker_threads']}, Redis; "
        f"stream {r['stream']})"
    )
    print(f"  turn ends          {_ms(r['turn'])}   all ended by {r['all_ended_s']:.1f} s, {r['turns_ok']} answered")
    print(f"  failures           {f['total']}" + "".join(f"   {k} {v}" for k, v in f.items() if k != "total"))
    print(f"  first words        {_ms(r['first_words'])}   missing {r['first_words']['missing']}")
    fw = r["first_words"]
    print(f"  POST → 202 (all)   {_ms(r['post'])}")
    print(f"    fake → stream    {_ms(fw['to_stream'])}")
    print(f"    stream → client  {_ms(fw['stream_to_client'])}")
    print("  where a turn's time goes (event ids give when the worker appended each event):")
    names = {
        "post": "POST → 202",
        "queued": "202 → pass started",
        "to_model": "started → model asked",
        "model": "model answering",
        "to_end": "last word → end event",
        "end_to_client": "end event → client",
    }
    for key, label in names.items():
        print(f"    {label:<22} {_ms(r['segments'][key], ('p50', 'p95', 'max'))}")
    print(f"  model requests     {m['requests']} ({m['streamed']} streamed), at most {m['max_in_flight']} in flight")
    for name in ("idle", "run"):
        s = login[name]
        print(f"  GET /login {name:<5}   {_ms(s, ('p50', 'p99', 'max'))}   failed {s['failed']}")
    print(f"  /login p99 ratio   {login['ratio_p99']:.2f}x" if login["ratio_p99"] else "  /login p99 ratio   -")
    for name in ("before", "peak", "after"):
        s = mem[name]
        line = "  ".join(f"{role} {_mem(s[role])}" for role in ("web", "worker", "fake") if role in s)
        print(f"  memory {name:<6}      {line}")
    for name in ("before", "after"):
        redis, db = mem[name]["redis"], mem[name].get("database", {})
        dbs = (
            f"PostgreSQL {db['backends']} backends {_mem(db)}"
            if "backends" in db
            else f"SQLite file {db.get('file_mb', 0):.1f} MB"
        )
        print(
            f"  {name:<6} Redis server {_mem(redis)} (used_memory {redis['used_memory_mb']:.1f} MB, "
            f"{redis['clients']} clients); {dbs}"
        )
    print(f"  phases             {r['phases_s']} s")
    print(
        "  CPU during run     "
        + "  ".join(f"{k} {v:.1f} s" for k, v in r["cpu_s"].items())
        + f"   load average {r['load_average_before']} → {r['load_average_after']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--words", type=int, default=20)
    parser.add_argument("--database-url", "--pg", dest="database_url", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--worker-class", default="gthread", choices=("gthread", "gevent"))
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=256, help="threads per gthread worker (its connections too)")
    parser.add_argument("--worker-threads", type=int, default=256, help="turns each turn worker runs at once")
    parser.add_argument(
        "--worker-processes",
        type=int,
        default=None,
        help="turn worker processes (default: one per core, the README's production shape; 1 with --streamed)",
    )
    parser.add_argument("--stream-after", action="store_true", help="open each stream right after its POST")
    parser.add_argument(
        "--streamed",
        type=int,
        default=0,
        metavar="N",
        help="each person POSTs with Accept: text/event-stream to `uvicorn asgi:app --workers N`, which runs the "
        "turn and answers with its events (the worker processes default to 1 then)",
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle /login samples")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds the turns may take")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.seconds, args.idle, args.limit = min(args.n, 20), 0.5, 1.0, 8.0
    result = run(
        args.n,
        args.seconds,
        args.words,
        args.database_url or temp_sqlite(),
        args.redis,
        args.idle,
        args.limit,
        args.worker_class,
        args.workers,
        args.threads,
        args.worker_threads,
        not args.stream_after,
        warm_rounds=1 if args.smoke else 3,
        worker_processes=args.worker_processes or (1 if args.streamed else os.cpu_count() or 1),
        asgi_workers=args.streamed,
    )
    if not args.json:
        show(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
