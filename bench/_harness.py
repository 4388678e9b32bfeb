"""Shared pieces of the benchmarks: a migrated, seeded database, a gunicorn server, timing."""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(database_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "COUNTERSIGN_ENV": "production", "SECRET_KEY": "bench-secret", "DATABASE_URL": database_url,
        "RATELIMIT_ENABLED": "0", "BENCH_PROBE": "1", "SESSION_COOKIE_SECURE": "0", **extra,
    })
    return env


def prepare(database_url: str, env: dict[str, str]) -> str:
    """Migrate from empty, seed the demo, and return a client-scoped token for alice (it answers cards)."""
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    if database_url.startswith("postgres"):
        subprocess.run(flask + ["db", "downgrade", "base"], cwd=ROOT, env=env, check=False, capture_output=True)
    subprocess.run(flask + ["db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    seed_env = {**env, "COUNTERSIGN_ENV": "development"}
    subprocess.run(flask + ["demo"], cwd=ROOT, env=seed_env, check=True, capture_output=True)
    out = subprocess.run(flask + ["users", "create-token", "alice@example.com", "--scope", "client"], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


SEED_POSTS = """
import sys
import sqlalchemy as sa
from app import create_app
from app.extensions import db
from app.models import Post, User
app = create_app()
with app.app_context():
    alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
    posts = [Post(tenant_id=alice.tenant_id, author_id=alice.id, title=f"Bench {i}") for i in range(int(sys.argv[1]))]
    db.session.add_all(posts)
    db.session.commit()
    print(",".join(str(p.id) for p in posts))
"""


def seed_posts(env: dict[str, str], n: int) -> list[int]:
    """n posts by alice, for n cards that each delete their own post."""
    out = subprocess.run([sys.executable, "-c", SEED_POSTS, str(n)], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True)
    return [int(x) for x in out.stdout.strip().splitlines()[-1].split(",")]


def insert_approvals(user: Any, n: int, prefix: str, declined: Any = lambda i: False) -> int:
    """n delete_post cards for `user` straight into the table (10,000 rows a statement, inside an
    app context), in one paused run of a new conversation, created a second apart, ids
    f"{prefix}{i:031x}"; those `declined(i)` says are declined. Returns the conversation's id."""
    from datetime import timedelta

    import sqlalchemy as sa

    from app.extensions import db
    from app.models import Approval, Conversation, Run, utcnow

    convo = Conversation(tenant_id=user.tenant_id, user_id=user.id)
    db.session.add(convo)
    db.session.flush()
    paused = Run(conversation_id=convo.id, status="paused")
    db.session.add(paused)
    db.session.flush()
    now = utcnow()
    for start in range(0, n, 10_000):
        db.session.execute(sa.insert(Approval), [{
            "id": f"{prefix}{i:031x}", "tenant_id": user.tenant_id, "user_id": user.id, "run_id": paused.id,
            "conversation_id": convo.id, "tool_call_id": f"c{i}", "step": 1, "action": "delete_post",
            "type": "confirm", "arguments": {"post": i}, "reason": "Delete this post? This cannot be undone.",
            "rows": [{"label": "Post", "value": f"Post {i}"}, {"label": "Status", "value": "draft"}],
            "digest": "0" * 64, "status": "declined" if declined(i) else "pending",
            "created_at": now - timedelta(seconds=n - i), "expires_at": now + timedelta(hours=2),
            "decided_at": now - timedelta(seconds=(n - i) // 2) if declined(i) else None,
        } for i in range(start, min(n, start + 10_000))])
    db.session.commit()
    return convo.id


@contextmanager
def gunicorn(env: dict[str, str], workers: int = 2) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "gunicorn"), "-w", str(workers), "-b", f"127.0.0.1:{port}", "--log-level", "warning", "wsgi:app"],
        cwd=ROOT, env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Client:
    """One keep-alive HTTP connection with a bearer token."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any, float]:
        data = json.dumps(body or {})
        start = time.perf_counter()
        self.conn.request("POST", path, body=data, headers=self.headers)
        response = self.conn.getresponse()
        raw = response.read()
        elapsed = time.perf_counter() - start
        return response.status, json.loads(raw or b"null"), elapsed


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000}


def temp_sqlite() -> str:
    return f"sqlite:///{tempfile.mkdtemp(prefix='countersign-bench-')}/bench.sqlite3"


def compare(baseline: str, candidate: str, a: list[float], b: list[float], database_url: str) -> dict[str, Any]:
    """The A/B figures of one run: each side's median and p99, and B over A."""
    first, second = summary(a), summary(b)
    return {"database": "postgresql" if database_url.startswith("postgres") else "sqlite", "n": len(b),
            baseline: first, candidate: second,
            "ratio_median": second["median_ms"] / first["median_ms"], "ratio_p99": second["p99_ms"] / first["p99_ms"]}


def main(run: Any, title: str, baseline: str, candidate: str, doc: str | None, where: str = "gunicorn -w 2",
         **options: int) -> Any:
    """The benchmarks' command line: --n, --database-url, --json and the script's own integer
    `options` (passed to run() by name); prints the figures, or their JSON with --json."""
    import argparse

    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", action="store_true")
    for name, default in options.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    result = run(args.n, args.database_url or temp_sqlite(), **{name: getattr(args, name) for name in options})
    if args.json:
        print(json.dumps(result))
        return result
    print(f"{title} ({result['database']}, n={result['n']}, {where})")
    for name in (baseline, candidate):
        s = result[name]
        print(f"  {name:<10} median {s['median_ms']:.2f} ms   p99 {s['p99_ms']:.2f} ms")
    print(f"  {'ratio':<10} median {result['ratio_median']:.2f}x   p99 {result['ratio_p99']:.2f}x")
    return result
