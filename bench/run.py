"""Every benchmark, each run three times in a fresh interpreter (A and B alternate inside each
run), and one table of the figures: the median of the runs and their min–max, beside the goal.

    .venv/bin/python bench/run.py [--runs 3] [--pg postgresql://...] [--redis redis://127.0.0.1:6379] [--smoke] [--only P4]
                                  [--save FILE]

--smoke: one short run of each, to show the benchmarks still work (CI prints it; no goal is
asserted anywhere). Without --pg, the PostgreSQL rows use COUNTERSIGN_BENCH_PG_URL, or are left out.
--only P4: only the benchmarks of the figures whose names start so (P1 … P6, L1, L2). Several: the
option again, or one value with commas ("L1 ours,P6"); a value whose pieces do not each start a
figure's name is one prefix, commas and all (figure names hold commas). A prefix that starts no
figure's name is an error, before anything runs.
--save FILE: every run's own figures (each benchmark's JSON, L1's with its peer's) as one JSON file.

L1 (slow_model.py) runs alternating with its peer, pydantic-ai's own AG-UI server (peer_agui.py):
L1, peer, L1, peer, …, each pair in the same minutes; the ratios (ours ÷ the peer's) are taken
within each pair, then their median and min–max. L1 runs in two shapes: the browser's (the event
stream open, then the POST; gunicorn and the turn workers) and the API client's streamed turn (the
POST answered with its turn by `uvicorn asgi:app`, which runs the pass: the peer's own shape). The
smoke runs the peer beside the first L1 of each shape only. The streamed L1 on SQLite also runs
beside the peer keeping the person's message and the reply in SQLite (`peer_agui.py --durable`):
L1, peer, durable peer, …; its rows say what those two writes alone cost the peer, and how far
ours is from that floor.

The web of P1 and L1 runs under WEB (gunicorn `-k gevent` where gevent is installed, else `-k
gthread`); L2 runs under each worker class installed, WEB first (the smoke: WEB only). P1 and L1
start `flask --app wsgi worker` beside it and use databases 11 and 10 of `--redis` (flushed first;
the test suite's own are 15 down to 12).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The gunicorn worker class of the web (the recommended one, where it is installed), and every
# class L2 compares (the smoke: the first only).
WEB = "gevent" if importlib.util.find_spec("gevent") else "gthread"
L2_CLASSES = (WEB, *(("gthread",) if WEB == "gevent" else ()))


@dataclass
class Figure:
    name: str
    goal: str
    unit: str
    read: Callable[[dict[str, Any]], float]
    met: Callable[[float], bool]


def bench(script: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(HERE / script), *args, "--json"], cwd=HERE, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr[-4000:], file=sys.stderr)
        out.check_returncode()
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ours_cpu_per_turn_ms(r: dict[str, Any]) -> float:
    """L1's server CPU per turn: the web, the turn workers, the ASGI server (when the turns are
    streamed there) and the Redis server, per person."""
    return 1000 * sum(r["cpu_s"].get(role, 0.0) for role in ("web", "worker", "asgi", "redis")) / r["n"]


def peer_figures(label: str, people: str) -> list[Figure]:
    """The figures of an L1 run and its peer's run (r["peer"]) of the same minutes."""
    return [
        Figure(
            f"L1 ours ÷ peer: turn end p99 ({label})",
            "≤ 1.1×",
            "×",
            lambda r: r["turn"]["p99_ms"] / r["peer"]["turn"]["p99_ms"],
            lambda v: v <= 1.1,
        ),
        Figure(
            f"L1 ours ÷ peer: server CPU per turn ({label})",
            "≤ 1.25×",
            "×",
            lambda r: ours_cpu_per_turn_ms(r) / r["peer"]["cpu_per_turn_ms"],
            lambda v: v <= 1.25,
        ),
        Figure(f"L1 server CPU per turn: web + workers + ASGI + Redis ({label})", "", "ms", ours_cpu_per_turn_ms, lambda v: True),
        Figure(
            f"L1 peer: turn end p99, {people} at once ({label} run)",
            "",
            "s",
            lambda r: r["peer"]["turn"]["p99_ms"] / 1000,
            lambda v: True,
        ),
        Figure(f"L1 peer: failed turns ({label} run)", "0", "", lambda r: r["peer"]["failures"]["total"], lambda v: v == 0),
        Figure(
            f"L1 peer: server CPU per turn, uvicorn ({label} run)",
            "",
            "ms",
            lambda r: r["peer"]["cpu_per_turn_ms"],
            lambda v: True,
        ),
        Figure(
            f"L1 peer: first words p95, fake sent → read ({label} run)",
            "",
            "ms",
            lambda r: r["peer"]["first_words"].get("p95_ms", float("inf")),
            lambda v: True,
        ),
        Figure(
            f"L1 peer: GET /health p99 during ÷ idle ({label} run)",
            "",
            "×",
            lambda r: r["peer"]["health"]["ratio_p99"] or float("inf"),
            lambda v: True,
        ),
    ]


def floor_figures(label: str) -> list[Figure]:
    """The peer keeping the person's message before its answer and the reply before its end
    (r["peer_durable"], the same minutes): what those two writes alone cost it, and ours against it."""
    return [
        Figure(
            f"L1 peer keeping its 2 writes ÷ peer: turn end p99 ({label} run)",
            "",
            "×",
            lambda r: r["peer_durable"]["turn"]["p99_ms"] / r["peer"]["turn"]["p99_ms"],
            lambda v: True,
        ),
        Figure(
            f"L1 peer keeping its 2 writes ÷ peer: server CPU per turn ({label} run)",
            "",
            "×",
            lambda r: r["peer_durable"]["cpu_per_turn_ms"] / r["peer"]["cpu_per_turn_ms"],
            lambda v: True,
        ),
        Figure(
            f"L1 peer keeping its 2 writes: failed turns ({label} run)",
            "0",
            "",
            lambda r: r["peer_durable"]["failures"]["total"],
            lambda v: v == 0,
        ),
        Figure(
            f"L1 ours ÷ peer keeping its 2 writes: turn end p99 ({label})",
            "",
            "×",
            lambda r: r["turn"]["p99_ms"] / r["peer_durable"]["turn"]["p99_ms"],
            lambda v: True,
        ),
        Figure(
            f"L1 ours ÷ peer keeping its 2 writes: server CPU per turn ({label})",
            "",
            "×",
            lambda r: ours_cpu_per_turn_ms(r) / r["peer_durable"]["cpu_per_turn_ms"],
            lambda v: True,
        ),
    ]


def l1_goals(label: str, people: str) -> list[Figure]:
    """L1's own goals, in either shape: the turn's end, failures, first words, `/login` meanwhile."""
    return [
        Figure(
            f"L1 turn end p99, {people} at once ({label})",
            "≤ 3.5 s",
            "s",
            lambda r: r["turn"]["p99_ms"] / 1000,
            lambda v: v <= 3.5,
        ),
        Figure(f"L1 failed turns ({label})", "0", "", lambda r: r["failures"]["total"], lambda v: v == 0),
        Figure(
            f"L1 first words p95, fake sent → stream read ({label})",
            "≤ 100 ms",
            "ms",
            lambda r: r["first_words"].get("p95_ms", float("inf")),
            lambda v: v <= 100,
        ),
        Figure(
            f"L1 GET /login p99 during ÷ idle ({label})",
            "≤ 3×",
            "×",
            lambda r: r["login"]["ratio_p99"] or float("inf"),
            lambda v: v <= 3,
        ),
    ]


# A benchmark: its script, its arguments, its figures; a fourth element, when there is one, is the
# peer's script and arguments, run after each of its runs (their figures read r["peer"]); a fifth,
# the peer keeping its two writes (peer_agui.py --durable), run after that (r["peer_durable"]).
Peer = tuple[str, list[str]]
Row = (
    tuple[str, list[str], list[Figure]]
    | tuple[str, list[str], list[Figure], Peer]
    | tuple[str, list[str], list[Figure], Peer, Peer]
)


def plan(smoke: bool, pg: str | None, redis: str) -> list[Row]:
    """Each benchmark: its script, its arguments, its figures, and the peer run beside each of its runs (or None)."""
    small = smoke
    few, many = ("100", "1k") if small else ("1k", "100k")
    databases: list[tuple[str, list[str]]] = [("SQLite", [])] + ([("PostgreSQL", ["--database-url", pg])] if pg else [])
    rows: list[Row] = []
    for label, db in databases:
        rows.append(
            (
                "confirm_roundtrip.py",
                ["--n", "10" if small else "200", "--worker-class", WEB, "--redis", f"{redis}/11", *db],
                [
                    Figure(
                        f"P1 confirm (respond-async) ÷ one INSERT, median ({label})",
                        "≤ 1.3×",
                        "×",
                        lambda r: r["ratio_median"],
                        lambda v: v <= 1.3,
                    ),
                    Figure(
                        f"P1 confirm (respond-async) ÷ one INSERT, p99 ({label})",
                        "≤ 2×",
                        "×",
                        lambda r: r["ratio_p99"],
                        lambda v: v <= 2,
                    ),
                    Figure(
                        f"P1 message (respond-async) ÷ one INSERT, median ({label})",
                        "≤ 1.5×",
                        "×",
                        lambda r: r["message_ratio_median"],
                        lambda v: v <= 1.5,
                    ),
                ],
            )
        )
    for label, db in databases:
        rows.append(
            (
                "admin_list.py",
                ["--n", "10" if small else "200", *db] + (["--small", "100", "--large", "1000"] if small else []),
                [
                    Figure(
                        f"P2 admin list, {many} rows ÷ {few} rows, median ({label})",
                        "≤ 1.3×",
                        "×",
                        lambda r: r["ratio_median"],
                        lambda v: v <= 1.3,
                    ),
                ],
            )
        )
    rows.append(
        (
            "connector_waits.py",
            ["--n", "1000" if small else "100000"],
            [
                Figure(f"P2 threads held by {many} waits", "0", "", lambda r: r["extra_threads"], lambda v: v == 0),
                Figure(f"P2 Redis memory for {many} waits", "≤ 32 MB", "MB", lambda r: r["redis_mb"], lambda v: v <= 32),
            ],
        )
    )
    for label, db in databases:
        rows.append(
            (
                "agent_turn.py",
                ["--n", "20" if small else "300", *db],
                [
                    Figure(
                        f"P3 agent turn ÷ persistence off, median ({label})",
                        "≤ 1.5×",
                        "×",
                        lambda r: r["ratio_median"],
                        lambda v: v <= 1.5,
                    ),
                    Figure(
                        f"P3 our own time per turn, p95 ({label})", "≤ 2 ms", "ms", lambda r: r["own_ms"]["p95"], lambda v: v <= 2
                    ),
                    Figure(
                        f"P3 floor: a turn's two durable writes alone, p95 ({label})",
                        "",
                        "ms",
                        lambda r: r["durable_writes_ms"]["p95"],
                        lambda v: True,
                    ),
                ],
            )
        )
    rows.append(
        (
            "pause_resume.py",
            ["--n", "20", "--warm", "5"] if small else ["--n", "300"],
            [
                Figure(
                    "P6 one approval in process, ours ÷ LangGraph, median (SQLite)",
                    "≤ 0.6×",
                    "×",
                    lambda r: r["ratio_langgraph_median"],
                    lambda v: v <= 0.6,
                ),
                Figure(
                    "P6 one approval, ours ÷ pydantic-ai alone, median (SQLite)",
                    "",
                    "×",
                    lambda r: r["ratio_pydantic_ai_median"],
                    lambda v: True,
                ),
                Figure(
                    "P6 pydantic-ai alone (its history stored) ÷ LangGraph, median",
                    "",
                    "×",
                    lambda r: r["pydantic_ai_langgraph_median"],
                    lambda v: True,
                ),
                Figure("P6 one approval, Countersign, median", "", "ms", lambda r: r["countersign"]["p50_ms"], lambda v: True),
                Figure("P6 one approval, LangGraph, median", "", "ms", lambda r: r["langgraph"]["p50_ms"], lambda v: True),
                Figure(
                    "P6 one approval, pydantic-ai alone, median", "", "ms", lambda r: r["pydantic_ai"]["p50_ms"], lambda v: True
                ),
                Figure(
                    "P6 floor (pydantic-ai's runs alone) ÷ LangGraph, median",
                    "",
                    "×",
                    lambda r: r["floor_langgraph_median"],
                    lambda v: True,
                ),
                Figure(
                    "P6 floor and the five durable writes ÷ LangGraph, median",
                    "",
                    "×",
                    lambda r: r["durable_floor_langgraph_median"],
                    lambda v: True,
                ),
                Figure(
                    "P6 floor, pydantic-ai's runs alone, median",
                    "",
                    "ms",
                    lambda r: r["floor"]["p50_ms"],
                    lambda v: True,
                ),
            ],
        )
    )
    rows.append(
        (
            "startup_and_page.py",
            ["--n", "1" if small else "5"],
            [
                Figure("P4 create_app()", "≤ 0.6 s", "s", lambda r: r["create_app_s"], lambda v: v <= 0.6),
                Figure(
                    "P4 a fresh process's first turn − its second",
                    "",
                    "s",
                    lambda r: r["first_turn_extra_s"],
                    lambda v: True,
                ),
                Figure(
                    "P4 chat page over the wire (gzip)",
                    "≤ 60 KB",
                    "KB",
                    lambda r: r["page_bytes"]["wire"] / 1024,
                    lambda v: v <= 60,
                ),
            ],
        )
    )
    people = "20" if small else "200"
    peer = ("peer_agui.py", ["--smoke"] if small else [])
    for k, (label, db) in enumerate([(f"{name}, {WEB}", args) for name, args in databases]):
        paired = not small or k == 0  # the smoke: one short peer run, beside the first L1 only
        rows.append(
            (
                "slow_model.py",
                [*(["--smoke"] if small else []), "--worker-class", WEB, "--redis", f"{redis}/10", *db],
                [
                    *(peer_figures(label, people) if paired else []),
                    *l1_goals(label, people),
                    Figure(
                        f"L1 model requests in flight at once ({label})",
                        "",
                        "",
                        lambda r: r["model"]["max_in_flight"],
                        lambda v: True,
                    ),
                    Figure(
                        f"L1 peak RSS, web: gunicorn master + workers ({label})",
                        "",
                        "MB",
                        lambda r: r["memory"]["peak"]["web"]["rss_mb"],
                        lambda v: True,
                    ),
                    Figure(
                        f"L1 peak PSS, web ({label})", "", "MB", lambda r: r["memory"]["peak"]["web"]["pss_mb"], lambda v: True
                    ),
                    Figure(
                        f"L1 peak RSS, turn worker ({label})",
                        "",
                        "MB",
                        lambda r: r["memory"]["peak"]["worker"]["rss_mb"],
                        lambda v: True,
                    ),
                    Figure(
                        f"L1 PSS of PostgreSQL's backends after ({label})" if db else f"L1 SQLite file after ({label})",
                        "",
                        "MB",
                        (lambda r: r["memory"]["after"]["database"]["pss_mb"])
                        if db
                        else (lambda r: r["memory"]["after"]["database"]["file_mb"]),
                        lambda v: True,
                    ),
                ],
                *((peer,) if paired else ()),
            )
        )
    # L1 again, each person an API client taking its turn as the answer to its POST (`Accept:
    # text/event-stream`), served by the ASGI process (`uvicorn asgi:app`, one per core) that runs
    # the pass itself: the peer's own shape, beside the same peer; on SQLite also beside the peer
    # keeping the person's message and the reply (the floor of any server that keeps them).
    cores = str(os.cpu_count() or 1)
    durable_peer = ("peer_agui.py", [*(["--smoke"] if small else []), "--durable"])
    for k, (label, db) in enumerate([(f"{name}, streamed", args) for name, args in databases]):
        rows.append(
            (
                "slow_model.py",
                [*(["--smoke"] if small else []), "--streamed", cores, "--redis", f"{redis}/10", *db],
                [
                    *peer_figures(label, people),
                    *(floor_figures(label) if k == 0 else []),
                    *l1_goals(label, people),
                ],
                *((peer, durable_peer) if k == 0 else (peer,)),
            )
        )
    for label, db in databases:
        rows.append(
            (
                "pass_floor.py",
                [*(["--smoke"] if small else []), "--redis", f"{redis}/9", *db],
                [
                    Figure(f"L1 floor: a pass's CPU ÷ the agent alone ({label})", "", "×", lambda r: r["ratio"], lambda v: True),
                    Figure(
                        f"L1 floor: CPU of 200 passes of the agent alone ÷ (cores × 3.5 s) ({label})",
                        "",
                        "%",
                        lambda r: r["l1_agent_alone_share"] * 100,
                        lambda v: True,
                    ),
                ],
            )
        )
    streams = "100" if small else "1000"
    for worker_class in L2_CLASSES[:1] if small else L2_CLASSES:
        rows.append(
            (
                "streams.py",
                [*(["--smoke"] if small else []), "--worker-class", worker_class, "--redis", f"{redis}/11"],
                [
                    Figure(
                        f"L2 {streams} open streams: failures ({worker_class})",
                        "0",
                        "",
                        lambda r: r["failures"],
                        lambda v: v == 0,
                    ),
                    Figure(
                        f"L2 web RSS per open stream ({worker_class})",
                        "",
                        "KB",
                        lambda r: r["memory"]["per_stream_rss_kb"],
                        lambda v: True,
                    ),
                    Figure(
                        f"L2 web PSS per open stream ({worker_class})",
                        "",
                        "KB",
                        lambda r: r["memory"]["per_stream_pss_kb"],
                        lambda v: True,
                    ),
                    Figure(
                        f"L2 GET /login p99 while open ÷ idle ({worker_class})",
                        "≤ 3×",
                        "×",
                        lambda r: r["login"]["ratio_p99"] or float("inf"),
                        lambda v: v <= 3,
                    ),
                    Figure(
                        f"L2 web CPU while held, % of a core ({worker_class})",
                        "",
                        "%",
                        lambda r: 100 * r["cpu_per_s"],
                        lambda v: True,
                    ),
                ],
            )
        )
    rows.append(
        (
            "webhook_ack.py",
            ["--seconds", "2" if small else "10"],
            [
                Figure(
                    "P5 webhook ack p99 at 50 req/s", "≤ 300 ms", "ms", lambda r: r["webhook_ack"]["p99_ms"], lambda v: v <= 300
                ),
                Figure("P5 webhook ack ÷ one INSERT, p99", "", "×", lambda r: r["ratio_p99"], lambda v: True),
            ],
        )
    )
    return rows


def prefixes(only: list[str], names: list[str]) -> tuple[str, ...]:
    """The name prefixes `--only` asks for (module docstring): each value split on its commas when
    every piece starts some figure's name, else whole. SystemExit naming a prefix that starts none."""
    chosen: list[str] = []
    for value in only:
        pieces = value.split(",")
        whole = len(pieces) > 1 and not all(any(n.startswith(p) for n in names) for p in pieces)
        chosen += [value] if whole else pieces
    unknown = [p for p in chosen if not any(n.startswith(p) for n in names)]
    if unknown:
        raise SystemExit(f"--only {unknown[0]!r} starts no figure's name (P1 … P6, L1, L2: see the table's rows)")
    return tuple(chosen)


def timed(script: str, script_args: list[str], which: str) -> dict[str, Any]:
    """One run of a benchmark, saying on standard error what runs and how long it took."""
    print(f"… {script} {' '.join(script_args)} ({which})", file=sys.stderr, end="", flush=True)
    began = time.monotonic()
    result = bench(script, *script_args)
    print(f": {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default=os.environ.get("COUNTERSIGN_BENCH_PG_URL"))
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="the Redis server of P1, L1, L2 (databases 9–11)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--save", default=None, metavar="FILE")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    started = time.monotonic()
    load = [round(x, 2) for x in os.getloadavg()]
    table: list[tuple[Figure, list[float]]] = []
    saved: list[dict[str, Any]] = []
    failed: list[str] = []
    planned = plan(args.smoke, args.pg, args.redis.rstrip("/"))
    wanted = prefixes(args.only, [f.name for _, _, every, *_ in planned for f in every]) if args.only else ("",)
    for script, script_args, every, *beside in planned:
        figures = [f for f in every if f.name.startswith(wanted)]
        if not figures:
            continue
        results = []
        for i in range(runs):
            try:
                result = timed(script, script_args, f"run {i + 1} of {runs}")
                if beside:  # the peer in the same minutes: L1, peer, L1, peer, …
                    result["peer"] = timed(*beside[0], f"beside run {i + 1} of {runs}")
                if len(beside) > 1:  # and the peer keeping its two writes: L1, peer, durable peer, …
                    result["peer_durable"] = timed(*beside[1], f"beside run {i + 1} of {runs}")
            except subprocess.CalledProcessError as error:
                # One failed run is reported (and fails the command at the end); the others still count.
                failed.append(f"{Path(error.cmd[1]).name} {' '.join(error.cmd[2:-1])} (run {i + 1} of {runs})")
                continue
            results.append(result)
        table.extend((f, [f.read(r) for r in results]) for f in figures)
        saved.append({"script": script, "args": script_args, "runs": results})
        if args.save:  # after each benchmark: a later failure keeps what was measured
            Path(args.save).write_text(json.dumps(saved))

    print(
        f"\nCountersign benchmarks: median of {runs} run(s), min–max beside it"
        f"{' (SMOKE: short runs, figures not meaningful)' if args.smoke else ''}; {os.cpu_count()} CPUs, "
        f"{time.monotonic() - started:.0f} s; load average {load} at the start, "
        f"{[round(x, 2) for x in os.getloadavg()]} at the end\n"
    )
    print(f"| {'figure':<64} | {'goal':<9} | {'median':>9} | {'min–max':<17} | met |")
    print(f"|{'-' * 66}|{'-' * 11}|{'-' * 11}|{'-' * 19}|-----|")
    for figure, values in table:
        if not values:
            print(f"| {figure.name:<64} | {figure.goal:<9} | {'failed':>9} | {'':<17} | {'':<3} |")
            continue
        mid = statistics.median(values)
        spread = f"{min(values):.2f}–{max(values):.2f}" + (f" ({len(values)} runs)" if len(values) != runs else "")
        met = "" if not figure.goal else ("yes" if figure.met(mid) else "no")
        print(f"| {figure.name:<64} | {figure.goal:<9} | {mid:>7.2f}{figure.unit:>2} | {spread:<17} | {met:<3} |")
    if failed:
        print("\nFailed runs (their figures are left out; see the error above each):\n" + "\n".join(f"  {f}" for f in failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
