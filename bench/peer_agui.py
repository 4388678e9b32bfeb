"""L1's peer: pydantic-ai's own AG-UI server, what a Python developer would pick instead of
Countersign for a streaming agent backend, under the load of bench/slow_model.py.

    python bench/peer_agui.py [--n 200] [--seconds 2] [--words 20] [--workers 2] [--limit 60] [--smoke] [--json]

The server: a Starlette app whose one route (`POST /`) returns `AGUIAdapter.dispatch_request(request,
agent=agent)` (pydantic-ai-slim[ag-ui], the version the app pins), plus `GET /health` for the probe,
served by `uvicorn --workers 2`. The agent has instructions, one tool, and the app's model client:
`OpenAIChatModel` with an `OpenAIProvider` over `AsyncOpenAI(max_retries=0, timeout=60)` pointed at
bench/fake_model.py (streams its words over `--seconds`). Nothing is stored: the client sends the
conversation (AG-UI's default), so the peer keeps no history, no run, no stream to resume.

n people each POST one AG-UI `RunAgentInput` (a thread id, a run id, one user message, no tools,
`Accept: text/event-stream`) at once and read the answer's stream to `RUN_FINISHED`.

Measured, as slow_model.py measures them: the turn's end (the POST's start → `RUN_FINISHED` read; a
turn not ended within `--limit` counts at the limit); failures (a status not 200, a stream that broke
or ended without `RUN_FINISHED`, `RUN_ERROR`, no model words, not in time); the first words' delay
(the fake's monotonic stamp of its first word → the client reading that text); `GET /health` every
100 ms (bench/_login_probe.py), idle and during the run; the CPU time of the uvicorn processes
(master and workers), the fake and these clients; RSS/PSS of the uvicorn processes.

--durable: the same peer keeping what any server that keeps its promises must keep, and nothing
more: the person's message written before the answer starts, and the reply written when the run
completes, before its `RUN_FINISHED` (the agent's `on_complete`). Each is one plain INSERT and its
commit, in a thread (`asyncio.to_thread`), on a SQLite file in WAL mode with `synchronous = FULL`
(as Countersign's connections), shared by both workers. It answers how much of L1's gap those two
writes alone cost, on this machine, in the same minutes (bench/run.py runs it beside the streamed
L1 on SQLite).

--smoke: 20 people, 0.5 s, 1 s of idle samples, 8 s for the turns (figures not meaningful).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _aio import EventStream, raise_open_files
from _harness import (
    LoginProbe,
    children,
    cpu_seconds,
    load_average,
    memory_of,
    percentiles,
    uvicorn,
)
from slow_model import REPLY, fake_model, fake_stats, first_words_figures, model_figures

HERE = Path(__file__).resolve().parent
INSTRUCTIONS = "You are a helpful assistant for a small blog. Answer briefly."


def make_app() -> Any:
    """The peer's ASGI app (uvicorn --factory): its model is the fake at PEER_MODEL_BASE_URL."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    client = AsyncOpenAI(base_url=os.environ["PEER_MODEL_BASE_URL"], api_key="bench", max_retries=0, timeout=60.0)
    agent = Agent(OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=client)), instructions=INSTRUCTIONS)

    @agent.tool_plain
    def list_posts(status: str = "draft") -> list[str]:
        """The titles of the blog's posts with this status."""
        return [f"A {status} post"]

    durable = os.environ.get("PEER_DURABLE")

    async def run(request: Request) -> Response:
        if not durable:
            return await AGUIAdapter.dispatch_request(request, agent=agent)
        sent = json.loads(await request.body())  # (Starlette keeps the body: the adapter reads it again)
        thread = str(sent.get("threadId"))
        await asyncio.to_thread(_keep, durable, thread, "user", str(sent["messages"][-1]["content"]))

        async def reply(result: Any) -> None:
            await asyncio.to_thread(_keep, durable, thread, "assistant", str(result.output))

        return await AGUIAdapter.dispatch_request(request, agent=agent, on_complete=reply)

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/", run, methods=["POST"]), Route("/health", health)])


_connections = threading.local()


def _keep(path: str, thread: str, role: str, text: str) -> None:
    """One durable write: an INSERT and its commit, on this thread's own connection to the file."""
    connection = getattr(_connections, "connection", None)
    if connection is None:
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        _connections.connection = connection
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO messages (thread, role, text) VALUES (?, ?, ?)", (thread, role, text))
    connection.execute("COMMIT")


def durable_file(folder: str) -> str:
    """The durable peer's SQLite file, with its one table."""
    path = os.path.join(folder, "peer.db")
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, thread TEXT, role TEXT, text TEXT)")
    connection.close()
    return path


class Server:
    """The uvicorn this benchmark started: its port and its processes."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes], shape: str, durable: str | None = None) -> None:
        self.port, self.proc, self.shape, self.durable = port, proc, shape, durable

    def kept(self) -> int | None:
        """The messages the durable peer has written so far (None: it keeps nothing)."""
        if self.durable is None:
            return None
        connection = sqlite3.connect(self.durable)
        try:
            return int(connection.execute("SELECT count(*) FROM messages").fetchone()[0])
        finally:
            connection.close()

    def pids(self) -> list[int]:
        """The master and its workers (and anything they started)."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children(pid))
        return found


@contextmanager
def serve(base_url: str, workers: int, durable: bool = False) -> Iterator[Server]:
    """`uvicorn --factory peer_agui:make_app --workers N` on a free port of 127.0.0.1; stopped on exit.
    `durable`: the two writes (module docstring) on a SQLite file of its own, removed after."""
    with tempfile.TemporaryDirectory(prefix="peer-durable-") as folder:
        env = {**os.environ, "PEER_MODEL_BASE_URL": f"{base_url}/v1"}
        if durable:
            env["PEER_DURABLE"] = durable_file(folder)
        kept = ", the message and the reply kept in SQLite" if durable else ""
        shape = f"uvicorn --workers {workers} (pydantic-ai AGUIAdapter{kept})"
        options = ("--factory", "--app-dir", str(HERE))
        with uvicorn("peer_agui:make_app", env, workers, HERE, "peer-uvicorn", options) as (port, proc):
            yield Server(port, proc, shape, env.get("PEER_DURABLE"))


def run_input(text: str) -> dict[str, Any]:
    """One AG-UI RunAgentInput: a new thread and run, one user message, no tools."""
    return {
        "threadId": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "state": None,
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def person(port: int, text: str, i: int, go: asyncio.Event | None, out: dict[str, Any]) -> None:
    """One person's run: POST it, read its events to RUN_FINISHED; fills `out` with what happened and when."""
    stream: EventStream | None = None
    try:
        if go is not None:
            await go.wait()
        out["start"] = time.monotonic()
        stream = await EventStream.open(port, "/", {}, method="POST", body=run_input(text))
        words: list[str] = []
        while (got := await stream.next_event()) is not None:
            at, event = got
            if "data" not in event:
                continue
            data = json.loads(event["data"])
            kind = data.get("type")
            if kind == "TEXT_MESSAGE_CONTENT":
                words.append(data.get("delta", ""))
                match = REPLY.search(data.get("delta", ""))
                if match and "first" not in out:
                    out["first"], out["request"] = at, int(match.group(1))
            elif kind == "RUN_ERROR":
                out["end"], out["state"], out["replied"] = at, "failed", False
                return
            elif kind == "RUN_FINISHED":
                out["end"], out["state"] = at, "done"
                out["replied"] = bool(REPLY.search("".join(words)))
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


def warm_up(port: int, width: int = 8, rounds: int = 3) -> None:
    """First imports and connections in every worker: instant runs ("[warm]"); raises when one fails."""

    async def some(outs: list[dict[str, Any]]) -> None:
        await asyncio.gather(*(person(port, "[warm] hello", i, None, out) for i, out in enumerate(outs)))

    for _ in range(rounds):
        outs: list[dict[str, Any]] = [{} for _ in range(width)]
        asyncio.run(some(outs))
        bad = [o for o in outs if o.get("state") != "done"]
        if bad:
            raise RuntimeError(f"warm-up runs failed: {bad[:3]}")


async def storm(port: int, n: int, limit: float, probe: LoginProbe) -> dict[str, Any]:
    """Everyone posts at once; each run's outcome."""
    raise_open_files(4 * n + 256)
    go = asyncio.Event()
    turns: list[dict[str, Any]] = [{"person": i} for i in range(n)]
    tasks = [
        asyncio.create_task(person(port, f"Hello from person-{i}: what can you do for me today?", i, go, turns[i]))
        for i in range(n)
    ]
    await asyncio.sleep(0.5)
    probe.start()
    started = time.monotonic()
    go.set()
    _, late = await asyncio.wait(tasks, timeout=limit)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    return {"turns": turns, "started": started, "ended": time.monotonic()}


def failures(turns: list[dict[str, Any]]) -> dict[str, int]:
    """Each run that did not end answered, by kind."""
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


def run(
    n: int, seconds: float, words: int, workers: int, idle: float, limit: float, warm_rounds: int = 3, durable: bool = False
) -> dict[str, Any]:
    with fake_model(seconds, words) as (base_url, fake), serve(base_url, workers, durable) as server:
        warm_up(server.port, rounds=warm_rounds)
        probe = LoginProbe(server.port, path="/health")
        idle_health = probe.sample(idle)
        load_before = load_average()
        before = {"server": memory_of(server.pids())}

        def cpu() -> dict[str, float]:
            return {"server": cpu_seconds(server.pids()), "fake": cpu_seconds([fake.pid]), "clients": cpu_seconds([os.getpid()])}

        cpu_before = cpu()
        kept_before = server.kept()
        out = asyncio.run(storm(server.port, n, limit, probe))
        during_health = probe.finish()
        cpu_after = cpu()
        kept_after = server.kept()
        after = {"server": memory_of(server.pids())}
        stats = fake_stats(base_url)
        shape = server.shape
    turns = out["turns"]
    cpu_s = {role: cpu_after[role] - cpu_before[role] for role in cpu_after}
    result: dict[str, Any] = {
        "bench": "L1 peer",
        "server": shape,
        "n": n,
        "model_seconds": seconds,
        "words": words,
        "turn": percentiles(
            [min(t.get("end", out["started"] + limit), out["started"] + limit) - t["start"] for t in turns if "start" in t]
        ),
        "all_ended_s": out["ended"] - out["started"],
        "failures": failures(turns),
        "turns_ok": sum(t.get("state") == "done" and bool(t.get("replied")) for t in turns),
        "kept": None if kept_before is None or kept_after is None else kept_after - kept_before,
        "first_words": first_words_figures(turns, stats),
        "model": model_figures(turns, stats),
        "health": {"idle": idle_health, "run": during_health},
        "memory": {"before": before, "after": after},
        "cpu_s": cpu_s,
        "cpu_per_turn_ms": 1000 * cpu_s["server"] / n,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    if result["kept"] is not None and result["kept"] < 2 * result["turns_ok"]:  # (a floor that wrote less is no floor)
        result["failures"]["not_kept"] = 2 * result["turns_ok"] - result["kept"]
        result["failures"]["total"] += result["failures"]["not_kept"]
    idle_p99, run_p99 = idle_health.get("p99_ms"), during_health.get("p99_ms")
    result["health"]["ratio_p99"] = run_p99 / idle_p99 if idle_p99 and run_p99 else None
    return result


def _ms(figures: dict[str, Any], keys: tuple[str, ...] = ("p50", "p95", "p99", "max")) -> str:
    if not figures.get("n"):
        return "no samples"
    return "  ".join(f"{k} {figures[f'{k}_ms']:7.1f} ms" for k in keys) + f"   (n={figures['n']})"


def show(r: dict[str, Any]) -> None:
    f, m, health = r["failures"], r["model"], r["health"]
    print(f"L1 peer: {r['n']} people at once, model {r['model_seconds']} s over {r['words']} words ({r['server']})")
    print(f"  turn ends          {_ms(r['turn'])}   all ended by {r['all_ended_s']:.1f} s, {r['turns_ok']} answered")
    print(f"  failures           {f['total']}" + "".join(f"   {k} {v}" for k, v in f.items() if k != "total"))
    print(f"  first words        {_ms(r['first_words'])}   missing {r['first_words']['missing']}")
    print(f"  model requests     {m['requests']} ({m['streamed']} streamed), at most {m['max_in_flight']} in flight")
    print(f"    before model     {_ms(m['wait_before_model'], ('p50', 'p95', 'max'))}")
    print(f"    after model      {_ms(m['after_model'], ('p50', 'p95', 'max'))}")
    for name in ("idle", "run"):
        s = health[name]
        print(f"  GET /health {name:<5}  {_ms(s, ('p50', 'p99', 'max'))}   failed {s['failed']}")
    print(f"  /health p99 ratio  {health['ratio_p99']:.2f}x" if health["ratio_p99"] else "  /health p99 ratio  -")
    print(f"  server CPU / turn  {r['cpu_per_turn_ms']:.1f} ms")
    if r["kept"] is not None:
        print(f"  kept               {r['kept']} messages (the people's and the replies)")
    for name in ("before", "after"):
        s = r["memory"][name]["server"]
        print(f"  memory {name:<6}      server RSS {s['rss_mb']:.0f} MB  PSS {s['pss_mb']:.0f} MB ({s['processes']} processes)")
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
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle /health samples")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds the runs may take")
    parser.add_argument("--durable", action="store_true", help="keep the message and the reply in SQLite")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.seconds, args.idle, args.limit = min(args.n, 20), 0.5, 1.0, 8.0
    warm_rounds = 1 if args.smoke else 3
    result = run(args.n, args.seconds, args.words, args.workers, args.idle, args.limit, warm_rounds, durable=args.durable)
    if not args.json:
        show(result)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
