"""Shared pieces of the benchmarks: a migrated, seeded database; gunicorn (sync, gthread or gevent)
and the turn worker, each stopping by itself; memory and CPU from /proc; the /login probe; timing."""

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
    env.update(
        {
            "COUNTERSIGN_ENV": "production",
            "SECRET_KEY": "bench-secret",
            "DATABASE_URL": database_url,
            "RATELIMIT_ENABLED": "0",
            "BENCH_PROBE": "1",
            "SESSION_COOKIE_SECURE": "0",
            "OFFLINE_WORD_PAUSE_MS": "0",  # the demo's pause would be measured as the app's time
            **extra,
        }
    )
    return env


PREPARE = """
import sys
import sqlalchemy as sa
from flask_migrate import upgrade
from app import create_app
from app.auth import create_token
from app.cli import seed_demo
from app.extensions import db
from app.models import User
app = create_app({"SWEEP_ON_START": False})
with app.app_context():
    if db.engine.dialect.name == "postgresql":  # (a fresh schema: see seed_people)
        with db.engine.begin() as connection:
            connection.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
            connection.exec_driver_sql("CREATE SCHEMA public")
    upgrade()
    seed_demo()
    alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
    print(create_token(alice, scope="client"))
"""


def prepare(database_url: str, env: dict[str, str]) -> str:
    """Migrate from empty (PostgreSQL: down to nothing first), seed the demo, and return a
    client-scoped token for alice (it answers cards); in one process (`flask db upgrade`, `flask
    demo` and `flask users create-token` each start the app)."""
    out = subprocess.run([sys.executable, "-c", PREPARE], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
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
    out = subprocess.run(
        [sys.executable, "-c", SEED_POSTS, str(n)], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
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
        db.session.execute(
            sa.insert(Approval),
            [
                {
                    "id": f"{prefix}{i:031x}",
                    "tenant_id": user.tenant_id,
                    "user_id": user.id,
                    "run_id": paused.id,
                    "conversation_id": convo.id,
                    "tool_call_id": f"c{i}",
                    "step": 1,
                    "action": "delete_post",
                    "type": "confirm",
                    "arguments": {"post": i},
                    "reason": "Delete this post? This cannot be undone.",
                    "rows": [{"label": "Post", "value": f"Post {i}"}, {"label": "Status", "value": "draft"}],
                    "digest": "0" * 64,
                    "status": "declined" if declined(i) else "pending",
                    "created_at": now - timedelta(seconds=n - i),
                    "expires_at": now + timedelta(hours=2),
                    "decided_at": now - timedelta(seconds=(n - i) // 2) if declined(i) else None,
                }
                for i in range(start, min(n, start + 10_000))
            ],
        )
    db.session.commit()
    return convo.id


def die_with_parent() -> None:
    """preexec_fn of every process a benchmark starts: it gets SIGTERM when the benchmark dies,
    however it dies (Linux PR_SET_PDEATHSIG), so nothing outlives a run."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


class Web:
    """A gunicorn server this benchmark started: its port, its master, and how it serves."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes], shape: str, log: Path) -> None:
        self.port, self.proc, self.shape, self.log = port, proc, shape, log

    def pids(self) -> list[int]:
        """The master and its workers."""
        return [self.proc.pid, *children(self.proc.pid)]


def web_args(worker_class: str, workers: int, threads: int, connections: int | None) -> tuple[list[str], str]:
    """gunicorn's options for a worker class, and a short description ("gthread 4×64")."""
    args = ["-k", worker_class, "-w", str(workers)]
    if worker_class == "gthread":
        # A worker takes no more connections than it has threads: a worker whose threads all hold
        # streams stops accepting, and the others take the next connection (gunicorn queues it
        # in the busy worker's thread pool otherwise, behind streams that last minutes).
        args += ["--threads", str(threads), "--worker-connections", str(connections or threads)]
        return args, f"gunicorn -k gthread -w {workers} --threads {threads} --worker-connections {connections or threads}"
    if worker_class == "gevent":
        args += ["--worker-connections", str(connections or 1000)]
        return args, f"gunicorn -k gevent -w {workers} --worker-connections {connections or 1000}"
    return args, f"gunicorn -k {worker_class} -w {workers}"


@contextmanager
def web(
    env: dict[str, str], worker_class: str = "sync", workers: int = 2, threads: int = 1, connections: int | None = None
) -> Iterator[Web]:
    """gunicorn serving wsgi:app on a free port of 127.0.0.1; stopped on exit."""
    port = free_port()
    args, shape = web_args(worker_class, workers, threads, connections)
    log = log_file("gunicorn")
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                *args,
                "-b",
                f"127.0.0.1:{port}",
                "--backlog",
                "4096",
                "--graceful-timeout",
                "5",
                "--log-level",
                "warning",
                "wsgi:app",
            ],
            cwd=ROOT,
            env=env,
            stderr=errors,
            preexec_fn=die_with_parent,
        )
    try:
        wait_for_port(port)
        serving(port, proc, log)
        yield Web(port, proc, shape, log)
    finally:
        stop(proc)


def serving(port: int, proc: subprocess.Popen[bytes], log: Path, seconds: float = 60) -> None:
    """Wait until `GET /login` answers 200 (the workers booted); else raise with the log's end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/login")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace").splitlines()[-15:]
    raise RuntimeError(f"gunicorn is not serving (see {log}):\n" + "\n".join(tail))


def log_file(name: str) -> Path:
    """A file for a started process's standard error (kept after the run: read it when a figure is odd)."""
    folder = Path(tempfile.gettempdir()) / "countersign-bench-logs"
    folder.mkdir(exist_ok=True)
    return folder / f"{name}-{os.getpid()}-{time.strftime('%H%M%S')}.log"


@contextmanager
def gunicorn(env: dict[str, str], workers: int = 2) -> Iterator[int]:
    """`gunicorn -w N` (sync workers) on a free port: its port."""
    with web(env, "sync", workers) as server:
        yield server.port


class Asgi:
    """The ASGI process this benchmark started (`uvicorn asgi:app`): its port and its processes."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.port, self.proc = port, proc

    def pids(self) -> list[int]:
        return [self.proc.pid, *children(self.proc.pid)]


@contextmanager
def uvicorn(
    app: str, env: dict[str, str], workers: int, cwd: Path, name: str, extra: tuple[str, ...] = ()
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`uvicorn APP --workers N` on a free port of 127.0.0.1, every worker started (each imports
    pydantic-ai before it serves); its port and process; stopped on exit, its workers killed."""
    port = free_port()
    log = log_file(name)
    args = ["--workers", str(workers), "--backlog", "4096", "--log-level", "warning", "--no-access-log", *extra]
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [str(BIN / "uvicorn"), app, "--port", str(port), *args], cwd=cwd, env=env, stderr=errors, preexec_fn=die_with_parent
        )
    try:
        wait_for_port(port, 60)
        deadline = time.monotonic() + 60
        while len(children(proc.pid)) < workers and time.monotonic() < deadline:
            time.sleep(0.2)
        yield port, proc
    finally:
        stop(proc, seconds=5)
        for pid in children(proc.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


@contextmanager
def asgi(env: dict[str, str], workers: int) -> Iterator[Asgi]:
    """`uvicorn asgi:app --workers N` (MCP and the streamed turns) on a free port; stopped on exit.
    The client's address is the app's to take (TRUSTED_PROXIES), as production runs it."""
    with uvicorn("asgi:app", env, workers, ROOT, "asgi", ("--no-proxy-headers",)) as (port, proc):
        yield Asgi(port, proc)


@contextmanager
def turn_worker(env: dict[str, str], threads: int) -> Iterator[subprocess.Popen[bytes]]:
    """`flask --app wsgi worker --threads N` (the Dramatiq worker that runs turns); stopped on exit."""
    log = log_file("worker")
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [str(BIN / "flask"), "--app", "wsgi", "worker", "--threads", str(threads)],
            cwd=ROOT,
            env=env,
            stderr=errors,
            preexec_fn=die_with_parent,
        )
    proc.log = log  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        stop(proc)


def stop(*procs: subprocess.Popen[Any], seconds: float = 15) -> None:
    """SIGTERM to each (at once: they stop side by side), then SIGKILL (the process and its
    children) to any still there after `seconds`. A gunicorn's workers get SIGKILL at once after
    its master's SIGTERM: nothing of a benchmark's is worth their graceful wait, and a worker
    whose threads wait in XREAD BLOCK would take its full graceful timeout to exit."""
    import signal

    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            if isinstance(proc.args, list) and str(proc.args[0]).endswith("gunicorn"):
                for pid in children(proc.pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
    deadline = time.monotonic() + seconds
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for pid in [*children(proc.pid), proc.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.wait(timeout=10)


def flush_redis(url: str) -> None:
    """Empty the benchmark's own Redis database (stale queued jobs of an earlier run would run)."""
    import redis

    redis.Redis.from_url(url).flushdb()


# --- processes, memory, CPU (from /proc) ---


def children(pid: int) -> list[int]:
    """The ids of pid's child processes."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def mb(pids: list[int], field: str = "Rss:") -> float:
    """The processes' memory from /proc/<pid>/smaps_rollup, in MB: Rss (each process's resident
    pages, shared ones counted in each) or Pss (shared pages split between the processes sharing
    them: sums without double counting)."""
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith(field)), 0)
    return total / 1024


def memory_of(pids: list[int]) -> dict[str, float]:
    return {"rss_mb": mb(pids), "pss_mb": mb(pids, "Pss:"), "processes": len(pids)}


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def threads_of(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return total


def redis_figures(url: str) -> dict[str, Any]:
    """The Redis server's own figures (shared by every database of the server) and, when it runs
    on this machine, its process's RSS/PSS."""
    import redis

    client = redis.Redis.from_url(url)
    info = {**client.info("memory"), **client.info("clients"), **client.info("server")}
    pid = int(info.get("process_id") or 0)
    process = memory_of([pid]) if pid and Path(f"/proc/{pid}").exists() else {}
    return {"used_memory_mb": info["used_memory"] / 2**20, "clients": info["connected_clients"], **process}


def redis_pid(url: str) -> int:
    """The Redis server's process id (0 when it does not say)."""
    import redis

    return int(redis.Redis.from_url(url).info("server").get("process_id") or 0)


def database_figures(database_url: str) -> dict[str, Any]:
    """PostgreSQL: the RSS/PSS of the server processes serving this database (its backends);
    SQLite: the size of the file and its WAL."""
    if database_url.startswith("postgres"):
        import psycopg

        with psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            pids = [
                row[0]
                for row in conn.execute(
                    "select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()"
                )
            ]
        return {"backends": len(pids), **memory_of(pids)}
    path = Path(database_url.removeprefix("sqlite:///"))
    files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    return {"file_mb": sum(f.stat().st_size for f in files if f.exists()) / 2**20}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank) and max, in ms; n samples."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000

    return {"n": len(ordered), "p50_ms": rank(0.5), "p95_ms": rank(0.95), "p99_ms": rank(0.99), "max_ms": ordered[-1] * 1000}


SEED_PEOPLE = """
import json, sys
from app import create_app
from app.auth import create_token
from app.extensions import db
from app.models import Conversation, Tenant, User
app = create_app({"SWEEP_ON_START": False})
with app.app_context():
    if sys.argv[3] == "fresh":
        from flask_migrate import upgrade
        if db.engine.dialect.name == "postgresql":
            # A fresh schema, not a downgrade through every migration: an older migration's check
            # fails on rows it forbids, which a test run left (CI's smoke after the PostgreSQL pass).
            with db.engine.begin() as connection:
                connection.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
                connection.exec_driver_sql("CREATE SCHEMA public")
        upgrade()
    tenant = Tenant(slug=sys.argv[2], name=sys.argv[2])
    db.session.add(tenant)
    db.session.flush()
    people = [User(tenant_id=tenant.id, email=f"person-{i}@{sys.argv[2]}.example", name=f"Person {i}")
              for i in range(int(sys.argv[1]))]
    db.session.add_all(people)
    db.session.flush()
    chats = [Conversation(tenant_id=tenant.id, user_id=p.id) for p in people]
    db.session.add_all(chats)
    db.session.commit()
    print(json.dumps([[create_token(p, name="bench", scope="client"), c.id] for p, c in zip(people, chats)]))
"""


def seed_people(env: dict[str, str], n: int, tenant: str = "bench", fresh: bool = False) -> list[tuple[str, int]]:
    """n people of a tenant of their own, each with a client-scoped token and a new conversation;
    `fresh`: first the schema from empty (PostgreSQL: down to nothing first), in the same process."""
    out = subprocess.run(
        [sys.executable, "-c", SEED_PEOPLE, str(n), tenant, "fresh" if fresh else "as-is"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return [(token, convo) for token, convo in json.loads(out.stdout.strip().splitlines()[-1])]


class LoginProbe:
    """`GET /login` (or `path`) every 100 ms from a process of its own (bench/_login_probe.py: the
    benchmark's own busy client does not slow the probe), open loop, a new connection each."""

    def __init__(self, port: int, every: float = 0.1, limit: float = 600, path: str = "/login") -> None:
        self.port, self.every, self.limit, self.path = port, every, limit, path
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "_login_probe.py"),
                str(self.port),
                "--every",
                str(self.every),
                "--limit",
                str(self.limit),
                "--path",
                self.path,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        # (no preexec_fn: it may start while this process runs threads; the probe stops by itself
        # when its standard input closes, as it does when this process dies, or after `limit`)

    def finish(self) -> dict[str, Any]:
        """Stop sending; wait for the probes still out (those not back within 60 s count as failed)."""
        assert self.proc is not None and self.proc.stdin is not None
        out, _ = self.proc.communicate("stop\n", timeout=120)
        self.proc = None
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def sample(self, seconds: float) -> dict[str, Any]:
        self.start()
        time.sleep(seconds)
        return self.finish()


class Client:
    """One keep-alive HTTP connection with a bearer token."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(
        self, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, float]:
        return self.request("POST", path, json.dumps(body or {}), headers)

    def get(self, path: str) -> tuple[int, Any, float]:
        return self.request("GET", path)

    def request(
        self, method: str, path: str, data: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, float]:
        start = time.perf_counter()
        self.conn.request(method, path, body=data, headers={**self.headers, **(headers or {})})
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
    return {
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": len(b),
        baseline: first,
        candidate: second,
        "ratio_median": second["median_ms"] / first["median_ms"],
        "ratio_p99": second["p99_ms"] / first["p99_ms"],
    }


def main(
    run: Any, title: str, baseline: str, candidate: str, doc: str | None, where: str = "gunicorn -w 2", **options: int
) -> Any:
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
