"""P3: one agent turn with an instant model, through Countersign (the person's message and its
queued run committed, the pass claimed, read, run, and its history and reply saved: the whole job,
run inline, TURNS_RUNNER=inline, as the test kit runs it) against the same pydantic-ai agent, tools
and model with persistence off, alternating A/B in one process, in one run.

    python bench/agent_turn.py [--n 300] [--database-url URL] [--json]

"Our own time" is each turn's time minus the paired bare turn's: what Countersign adds. Beside
them, in the same alternation, the floor of any turn that keeps its promises: its two durable
writes alone (the person's message committed before the answer, the reply committed at the end),
each one plain INSERT and its commit in a table of its own in the same database (on SQLite, WAL
and `synchronous = FULL`, as the app's connections), with no ORM, no Redis and no model.
"""

from __future__ import annotations

import asyncio
import sys
import time

from _harness import compare, env_for, main, prepare


def run(n: int, database_url: str) -> dict[str, object]:
    import os

    env = env_for(database_url, TURNS_RUNNER="inline")
    prepare(database_url, env)
    os.environ.update(env)
    import sqlalchemy as sa
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    from app import copilot, create_app
    from app.copilot.turns import _agent as agent
    from app.copilot.turns import _loop as loop
    from app.extensions import db
    from app.models import Conversation, Message, Run, User

    instant = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Noted.")]), model_name="instant")
    app = create_app({"SWEEP_ON_START": False})
    with app.app_context():
        engine = agent.engine()
        engine.use_model(instant)
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        assert user is not None

        def bare() -> float:
            turn = agent.Turn(ctx=agent.context_for(user, "web"), run=Run(), registry=engine.registry, step=1)
            start = time.perf_counter()
            asyncio.run(
                loop.agent(engine).run(
                    "What is on my list?", deps=turn, model=instant, usage_limits=UsageLimits(request_limit=engine.max_steps)
                )
            )
            return time.perf_counter() - start

        def countersign() -> float:
            conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id)  # not timed: a new chat
            db.session.add(conversation)
            db.session.commit()
            start = time.perf_counter()
            copilot.send_message(conversation, copilot.person(user, "web"), "What is on my list?")
            return time.perf_counter() - start

        with db.engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE IF NOT EXISTS bench_durable (text TEXT)"))

        def durable() -> float:
            start = time.perf_counter()
            for text in ("What is on my list?", "Noted."):  # the message, then the reply
                with db.engine.begin() as connection:
                    connection.execute(sa.text("INSERT INTO bench_durable (text) VALUES (:text)"), {"text": text})
            return time.perf_counter() - start

        for _ in range(20):  # warm up all three
            bare()
            countersign()
            durable()
        replied = db.session.scalar(sa.select(Message.text).where(Message.role == "assistant").order_by(Message.id.desc()))
        assert replied == "Noted.", f"the turn ran no pass inline (reply {replied!r})"
        a: list[float] = []
        b: list[float] = []
        floor: list[float] = []
        for i in range(n):
            for which in (bare, countersign, durable) if i % 2 == 0 else (countersign, durable, bare):
                {bare: a, countersign: b, durable: floor}[which].append(which())
        with db.engine.begin() as connection:
            connection.execute(sa.text("DROP TABLE bench_durable"))
    result = compare("bare_turn", "countersign", a, b, database_url)
    own = sorted(y - x for x, y in zip(a, b, strict=True))
    result["own_ms"] = {"median": own[len(own) // 2] * 1000, "p95": own[int(0.95 * (len(own) - 1))] * 1000}
    floor.sort()
    result["durable_writes_ms"] = {"median": floor[len(floor) // 2] * 1000, "p95": floor[int(0.95 * (len(floor) - 1))] * 1000}
    return result


if __name__ == "__main__":
    out = main(run, "P3 agent turn, instant model, vs persistence off", "bare_turn", "countersign", __doc__, where="in process")
    if "--json" not in sys.argv:
        print(f"  our own time: median {out['own_ms']['median']:.2f} ms   p95 {out['own_ms']['p95']:.2f} ms")
        floor = out["durable_writes_ms"]
        print(f"  the two durable writes alone: median {floor['median']:.2f} ms   p95 {floor['p95']:.2f} ms")
