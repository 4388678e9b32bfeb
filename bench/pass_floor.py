"""L1's floor: the CPU one pass of a turn costs, against the same pass of pydantic-ai alone, in one
process on one event loop (as a turn worker runs them), the model bench/fake_model.py streaming
its words over `--seconds`.

    python bench/pass_floor.py [--n 200] [--rounds 2] [--seconds 2] [--database-url URL]
                               [--redis redis://127.0.0.1:6379/9] [--smoke] [--json]

A: the agent alone: the app's own pydantic-ai agent (the same tools, instructions and model
client) streaming n answers at once, with no database, Redis, history or events. B: n passes at
once through the turn executor (`app.copilot.turns.execute`: claim, history, the streamed words'
events, the end), each a message posted with `Prefer: respond-async` (not timed). A and B
alternate, `--rounds` times each. Measured: process CPU time per pass of each (time.process_time
around the n passes), B ÷ A, and what L1's goal allows: its 200 turns must end within 3.5 s on
this machine's cores, so `A × 200` against `cores × 3.5 s` says how much of that budget the agent
library takes before any of the app's work (the web, Redis, the database, the clients).

--smoke: 10 passes, one round, 0.5 s (shows the benchmark works; figures not meaningful).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from _harness import flush_redis, seed_people, temp_sqlite
from slow_model import env_with_fake, fake_model

L1_TURNS, L1_SECONDS = 200, 3.5


class _Everything:
    """The deps of a bare pass: every tool is offered (as to a session that reaches them all)."""

    def reaches(self, name: str) -> bool:
        return True


async def bare_passes(eng: Any, n: int) -> float:
    """n passes of the app's agent alone, at once: CPU seconds."""
    from pydantic_ai import Agent

    from app.copilot.turns import _loop as loop

    agent, model = loop.agent(eng), loop.model(eng)

    async def one(i: int) -> None:
        async with agent.iter(f"hello from person-{i}", deps=_Everything(), model=model) as run:  # type: ignore[arg-type]
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with node.stream(run.ctx) as stream:
                        async for _ in stream:
                            pass

    start = time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.process_time() - start


def run(n: int, rounds: int, seconds: float, database_url: str, redis_url: str) -> dict[str, Any]:
    flush_redis(redis_url)
    with fake_model(seconds, 20) as (base_url, _):
        env = env_with_fake(database_url, redis_url, base_url)
        people = seed_people(env, n * rounds + 1, "bench-floor", fresh=True)
        os.environ.update(env)
        from app import create_app
        from app.copilot import engine
        from app.copilot.turns import execute

        app = create_app({"SWEEP_ON_START": False})
        client = app.test_client()

        def post(token: str, convo: int, text: str) -> int:
            answer = client.post(
                f"/api/conversations/{convo}/messages",
                json={"text": text},
                headers={"Authorization": f"Bearer {token}", "Prefer": "respond-async"},
            )
            assert answer.status_code == 202, answer.get_data(as_text=True)
            return int(answer.get_json()["run"])

        async def our_passes(run_ids: list[int]) -> float:
            start = time.process_time()
            await asyncio.gather(*(execute(app, run_id) for run_id in run_ids))
            return time.process_time() - start

        async def rounds_of_both() -> tuple[list[float], list[float]]:
            with app.app_context():
                eng = engine()
            await our_passes([post(*people[0], "[warm] person-0")])  # first imports, connections
            with app.app_context():
                await bare_passes(eng, 1)
            bare: list[float] = []
            ours: list[float] = []
            for r in range(rounds):
                with app.app_context():
                    bare.append(await bare_passes(eng, n) / n)
                batch = people[1 + r * n : 1 + (r + 1) * n]
                run_ids = [post(token, convo, f"hello from person-{i}") for i, (token, convo) in enumerate(batch)]
                ours.append(await our_passes(run_ids) / n)
            return bare, ours

        bare, ours = asyncio.run(rounds_of_both())
        done = _statuses(app)
    floor_ms, ours_ms = statistics.median(bare) * 1000, statistics.median(ours) * 1000
    cores = os.cpu_count() or 1
    return {
        "bench": "L1 floor",
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": n,
        "rounds": rounds,
        "model_seconds": seconds,
        "agent_alone_ms": floor_ms,
        "pass_ms": ours_ms,
        "agent_alone_each_ms": [b * 1000 for b in bare],
        "pass_each_ms": [o * 1000 for o in ours],
        "ratio": ours_ms / floor_ms,
        "cores": cores,
        "l1_agent_alone_share": floor_ms / 1000 * L1_TURNS / (cores * L1_SECONDS),
        "l1_passes_share": ours_ms / 1000 * L1_TURNS / (cores * L1_SECONDS),
        "passes_ended": done,
    }


def _statuses(app: Any) -> dict[str, int]:
    import sqlalchemy as sa

    from app.extensions import db
    from app.models import Run

    with app.app_context():
        rows = db.session.execute(sa.select(Run.status, sa.func.count()).group_by(Run.status)).all()
        return {str(status): int(count) for status, count in rows}


def show(r: dict[str, Any]) -> None:
    print(
        f"L1 floor: {r['n']} passes at once on one event loop, {r['rounds']} rounds, "
        f"model {r['model_seconds']} s ({r['database']})"
    )
    each = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(r["agent_alone_each_ms"], r["pass_each_ms"], strict=True))
    print(
        f"  CPU a pass: the agent alone {r['agent_alone_ms']:.1f} ms, a pass {r['pass_ms']:.1f} ms: "
        f"{r['ratio']:.2f}×  (rounds: {each})"
    )
    print(
        f"  L1's {L1_TURNS} turns within {L1_SECONDS} s on {r['cores']} cores: the agent alone takes "
        f"{r['l1_agent_alone_share']:.0%} of the CPU there is, the passes {r['l1_passes_share']:.0%}"
    )
    print(f"  passes ended: {r['passes_ended']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--database-url", "--pg", dest="database_url", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n, rounds, seconds = (10, 1, 0.5) if args.smoke else (args.n, args.rounds, args.seconds)
    result = run(n, rounds, seconds, args.database_url or temp_sqlite(), args.redis)
    if args.json:
        print(json.dumps(result))
    else:
        show(result)


if __name__ == "__main__":
    sys.exit(main())
