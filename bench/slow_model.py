"""L1 load: n people each send one message at once while the model takes `--seconds` per request,
the app in the README's production shape (`gunicorn -w 4`, Redis, SQLite file or PostgreSQL, rate
limits off), the model a local fake OpenAI-compatible server (bench/fake_model.py) that streams
its words over those seconds (or answers whole after them: today's app does not stream).

    python bench/slow_model.py [--n 200] [--seconds 2] [--database-url URL | --pg URL]
                               [--redis redis://127.0.0.1:6379/13] [--limit 120] [--smoke] [--json]

Measured: when each person's `POST /api/conversations/{id}/messages` ends (its own connection,
client timeout 60 s; a turn that times out or fails counts at the time the client gave up);
failures (non-2xx, timeouts, a 200 whose reply is the model-failed notice); `GET /login` sampled
every 100 ms (open loop, a new connection each; a failed probe also counts at the time it gave up)
while idle and during the run; the RSS and PSS of gunicorn (master + workers) and of the fake
before, at peak and after; from the fake's log, how long each
turn waited before its model request arrived and after its model finished, and how many model
requests were in flight at once. When `GET /api/conversations/{id}/events` answers an SSE stream,
each person's stream is read and the first words' delay (fake sent → stream delivered) is
measured too. Everything is on 127.0.0.1 and stops by itself within `--limit` seconds of the start.

--smoke: 20 people, 0.5 s, a short idle sample (shows the benchmark still works; figures not meaningful).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _harness import Client, env_for, gunicorn, prepare, temp_sqlite

HERE = Path(__file__).resolve().parent
WORKERS = 4  # the README's production shape
CLIENT_TIMEOUT = 60.0
REPLY = re.compile(r"Reply-(\d+)")

SEED_PEOPLE = """
import json, sys
from app import create_app
from app.auth import create_token
from app.extensions import db
from app.models import Conversation, Tenant, User
app = create_app()
with app.app_context():
    tenant = Tenant(slug="bench-l1", name="Bench L1")
    db.session.add(tenant)
    db.session.flush()
    people = [User(tenant_id=tenant.id, email=f"person-{i}@bench.example", name=f"Person {i}") for i in range(int(sys.argv[1]))]
    db.session.add_all(people)
    db.session.flush()
    chats = [Conversation(tenant_id=tenant.id, user_id=p.id) for p in people]
    db.session.add_all(chats)
    db.session.commit()
    print(json.dumps([[create_token(p, name="bench-l1", scope="client"), c.id] for p, c in zip(people, chats)]))
"""


def seed_people(env: dict[str, str], n: int) -> list[tuple[str, int]]:
    """n people of a tenant of their own, each with a client-scoped token and a new conversation."""
    out = subprocess.run([sys.executable, "-c", SEED_PEOPLE, str(n)], cwd=HERE.parent, env=env,
                         check=True, capture_output=True, text=True)
    return [(token, convo) for token, convo in json.loads(out.stdout.strip().splitlines()[-1])]


@contextmanager
def fake_model(seconds: float, words: int) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """bench/fake_model.py in a process of its own; yields its base URL and the process."""
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_model.py"), "--seconds", str(seconds),
                             "--words", str(words)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def fake_stats(base_url: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection(base_url.removeprefix("http://"), timeout=30)
    conn.request("GET", "/_stats")
    return json.loads(conn.getresponse().read())


def children(pid: int) -> list[int]:
    """The ids of pid's child processes (from /proc)."""
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


def gunicorn_pids() -> list[int]:
    """The gunicorn master this process started and its workers."""
    masters = [p for p in children(os.getpid()) if b"gunicorn" in _cmdline(p)]
    return masters + [w for m in masters for w in children(m)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def mb(pids: list[int], field: str = "Rss:") -> float:
    """The processes' memory from /proc/<pid>/smaps_rollup: Rss (each process's resident pages) or
    Pss (shared pages split between the processes sharing them: sums without double counting)."""
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith(field)), 0)
    return total / 1024


def memory(fake_pid: int) -> dict[str, float]:
    server = gunicorn_pids()
    app_mb, fake_mb = mb(server), mb([fake_pid])
    return {"gunicorn_mb": app_mb, "gunicorn_processes": len(server), "fake_mb": fake_mb, "total_mb": app_mb + fake_mb,
            "gunicorn_pss_mb": mb(server, "Pss:"), "fake_pss_mb": mb([fake_pid], "Pss:")}


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank) and max, in ms; n samples."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000

    return {"n": len(ordered), "p50_ms": rank(0.5), "p95_ms": rank(0.95), "p99_ms": rank(0.99),
            "max_ms": ordered[-1] * 1000}


class LoginProbe:
    """GET /login every `every` seconds, each on a new connection in a thread of its own (open
    loop: a stalled server meets as many probes as a person reloading would send); also samples
    memory every 0.5 s into `peak`."""

    def __init__(self, port: int, fake_pid: int, every: float = 0.1) -> None:
        self.port, self.fake_pid, self.every = port, fake_pid, every
        self.samples: list[float] = []
        self.failed = 0
        self.peak: dict[str, float] = {}
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def one(self) -> None:
        start = time.perf_counter()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT)
            conn.request("GET", "/login")
            response = conn.getresponse()
            response.read()
            conn.close()
            ok = response.status == 200
        except OSError:
            ok = False
        with self.lock:  # a failed probe counts at the time it gave up, as a turn does
            self.samples.append(time.perf_counter() - start)
            self.failed += not ok

    def loop(self) -> None:
        tick = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            thread = threading.Thread(target=self.one, daemon=True)
            thread.start()
            self.threads.append(thread)
            if tick % 5 == 0:
                now = memory(self.fake_pid)
                if now["total_mb"] > self.peak.get("total_mb", 0):
                    self.peak = now
            tick += 1
            next_at += self.every
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def sample(self, seconds: float) -> dict[str, Any]:
        """Probe for `seconds` (idle), then wait for the probes."""
        self.start()
        time.sleep(seconds)
        return self.finish(time.monotonic() + CLIENT_TIMEOUT)

    def start(self) -> None:
        self.stop.clear()
        self.runner = threading.Thread(target=self.loop, daemon=True)
        self.runner.start()

    def finish(self, deadline: float) -> dict[str, Any]:
        """Stop sending; wait for the probes sent until `deadline`; those still out count as failed
        (and are left out of the times)."""
        self.stop.set()
        self.runner.join()
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            unfinished = sum(t.is_alive() for t in self.threads)
            result = {**percentiles(self.samples), "failed": self.failed + unfinished, "sent": len(self.threads)}
            self.samples, self.failed, self.threads = [], 0, []
        return result


def sse_events(response: http.client.HTTPResponse) -> Iterator[tuple[float, dict[str, str]]]:
    """The events of a text/event-stream response, each with the time its last line arrived."""
    event: dict[str, str] = {}
    while True:
        line = response.readline()
        if not line:
            return
        text = line.decode().rstrip("\r\n")
        if not text:
            if event:
                yield time.monotonic(), event
            event = {}
        elif not text.startswith(":"):
            name, _, value = text.partition(":")
            value = value.removeprefix(" ")
            event[name] = f"{event[name]}\n{value}" if name == "data" and name in event else value


def open_events(port: int, token: str, convo: int) -> http.client.HTTPResponse | None:
    """The conversation's event stream, or None where the app has none (today: 404)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    conn.request("GET", f"/api/conversations/{convo}/events",
                 headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})
    response = conn.getresponse()
    if response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream"):
        return response
    response.read()
    conn.close()
    return None


def first_words(response: http.client.HTTPResponse, seen: dict[str, Any]) -> None:
    """Read the stream until the fake's first words (`Reply-<n>`) arrive; note when, and which request."""
    try:
        for at, event in sse_events(response):
            match = REPLY.search(event.get("data", ""))
            if match:
                seen.update(at=at, request=int(match.group(1)))
                return
    except OSError as exc:
        seen["error"] = type(exc).__name__
    finally:
        response.close()


def one_turn(port: int, token: str, convo: int, person: int, go: threading.Event, out: dict[str, Any]) -> None:
    """One person's message on its own connection, sent when `go` is set."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    body = json.dumps({"text": f"Hello from person-{person}: what can you do for me today?"})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        conn.connect()
        go.wait()
        out["start"] = time.monotonic()
        conn.request("POST", f"/api/conversations/{convo}/messages", body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        out["status"] = response.status
        if response.status == 200:
            roles = [m.get("role") for m in (json.loads(raw or b"{}").get("messages") or [])]
            out["model_failed"] = "error" in roles
    except TimeoutError:
        out["error"] = "timeout"
    except OSError as exc:
        out["error"] = type(exc).__name__
    finally:
        out["end"] = time.monotonic()
        conn.close()


def warm_up(port: int, token: str, rounds: int = 3, width: int = 8) -> None:
    """First imports and connections in every worker: instant turns ("[warm]") and sign-in pages."""
    client = Client(port, token)
    convos = [client.post("/api/conversations")[1]["id"] for _ in range(width)]

    def turn(convo: int) -> None:
        Client(port, token).post(f"/api/conversations/{convo}/messages", {"text": "[warm] hello"})
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        conn.request("GET", "/login")
        conn.getresponse().read()

    for _ in range(rounds):
        threads = [threading.Thread(target=turn, args=(c,)) for c in convos]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def storm(port: int, people: list[tuple[str, int]], probe: LoginProbe, limit: float) -> dict[str, Any]:
    """Everyone sends at once; returns each turn's outcome, the first words seen on each stream,
    the sign-in page during the run and when the window closed."""
    go = threading.Event()
    turns: list[dict[str, Any]] = [{"person": i} for i in range(len(people))]
    seen: list[dict[str, Any]] = [{} for _ in people]
    streams = [open_events(port, token, convo) for token, convo in people[:1]]
    if streams[0] is not None:
        streams += [open_events(port, token, convo) for token, convo in people[1:]]
    threads = [threading.Thread(target=first_words, args=(s, seen[i]), daemon=True)
               for i, s in enumerate(streams) if s is not None]
    threads += [threading.Thread(target=one_turn, args=(port, token, convo, i, go, turns[i]), daemon=True)
                for i, (token, convo) in enumerate(people)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every connection open before anyone sends
    started = time.monotonic()
    deadline = started + limit
    probe.start()
    go.set()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    ended = time.monotonic()
    during = probe.finish(deadline)
    return {"turns": turns, "seen": seen, "streams": streams[0] is not None, "login": during,
            "started": started, "ended": ended}


def model_figures(turns: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """From the fake's log: each finished turn's wait before its model request arrived and after
    the model's last word, and the most model requests in flight at once during the run."""
    by_person: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r["person"] is not None and r["sent"]:
            by_person.setdefault(r["person"], []).append(r)
    before, after = [], []
    for turn in turns:
        mine = by_person.get(turn["person"])
        if mine and turn.get("status") == 200 and not turn.get("model_failed"):
            before.append(min(r["arrived"] for r in mine) - turn["start"])
            after.append(turn["end"] - max(r["sent"][-1] for r in mine))
    edges = sorted([(r["arrived"], 1) for rs in by_person.values() for r in rs]
                   + [(r["sent"][-1], -1) for rs in by_person.values() for r in rs])
    level = most = 0
    for _, step in edges:
        level += step
        most = max(most, level)
    return {"requests": sum(len(rs) for rs in by_person.values()),
            "streamed": sum(r["stream"] for rs in by_person.values() for r in rs),
            "max_concurrent": most, "wait_before_model": percentiles(before), "after_model": percentiles(after)}


def first_words_figures(seen: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Fake sent its first words → the person's stream delivered them."""
    sent = {r["n"]: r["sent"][0] for r in records if r["sent"]}
    delays = [s["at"] - sent[s["request"]] for s in seen if "at" in s and s["request"] in sent]
    return {**percentiles(delays), "missing": len(seen) - len(delays)}


def failures(turns: list[dict[str, Any]]) -> dict[str, int]:
    """Each turn that did not end answered, by kind. A 202 (the turn still going) is not its end:
    it counts here until the bench reads the turn's end from its event stream."""
    counts: dict[str, int] = {}
    for turn in turns:
        kind = (turn.get("error") or (f"http_{turn['status']}" if turn.get("status", 200) != 200 else None)
                or ("model_failed" if turn.get("model_failed") else None)
                or (None if "status" in turn else "unfinished"))
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return {"total": sum(counts.values()), **counts}


def run(n: int, seconds: float, words: int, database_url: str, redis_url: str, idle: float,
        limit: float) -> dict[str, Any]:
    with fake_model(seconds, words) as (base_url, fake):
        env = env_for(database_url, REDIS_URL=redis_url, COUNTERSIGN_MODEL="openai:fake",
                      COUNTERSIGN_MODEL_BASE_URL=f"{base_url}/v1", COUNTERSIGN_MODEL_API_KEY="bench")
        alice = prepare(database_url, env)
        people = seed_people(env, n)
        try:
            with gunicorn(env, workers=WORKERS) as port:
                warm_up(port, alice)
                probe = LoginProbe(port, fake.pid)
                before = memory(fake.pid)
                idle_login = probe.sample(idle)
                out = storm(port, people, probe, limit)
                after = memory(fake.pid)
                records = fake_stats(base_url)["requests"]
                fake.terminate()  # the turns still queued (clients gone) now fail at once: gunicorn stops quickly
        except subprocess.TimeoutExpired:  # a worker still waiting on a lock: end what this run started
            for pid in gunicorn_pids():
                os.kill(pid, signal.SIGKILL)
    turns = out["turns"]
    result: dict[str, Any] = {
        "bench": "L1", "database": "postgresql" if database_url.startswith("postgres") else "sqlite", "n": n,
        "model_seconds": seconds, "words": words, "workers": WORKERS,
        "turn": percentiles([t["end"] - t["start"] for t in turns if "start" in t]),
        "all_ended_s": max((t["end"] for t in turns if "end" in t), default=out["ended"]) - out["started"],
        "failures": failures(turns),
        "turns_ok": sum(t.get("status") == 200 and not t.get("model_failed") for t in turns),
        "login": {"idle": idle_login, "run": out["login"]},
        "memory": {"before": before, "peak": probe.peak or after, "after": after},
        "model": model_figures(turns, records),
        "first_words": first_words_figures(out["seen"], records) if out["streams"] else None,
    }
    idle_p99, run_p99 = idle_login.get("p99_ms"), out["login"].get("p99_ms")
    result["login"]["ratio_p99"] = run_p99 / idle_p99 if idle_p99 and run_p99 else None
    return result


def _ms(figures: dict[str, Any], keys: tuple[str, ...] = ("p50", "p95", "p99", "max")) -> str:
    if not figures.get("n"):
        return "no samples"
    return "  ".join(f"{k} {figures[f'{k}_ms'] / 1000:6.2f} s" for k in keys) + f"   (n={figures['n']})"


def show(r: dict[str, Any]) -> None:
    f, m, login, mem = r["failures"], r["model"], r["login"], r["memory"]
    print(f"L1 load: {r['n']} people at once, model {r['model_seconds']} s over {r['words']} words "
          f"({r['database']}, gunicorn -w {r['workers']}, Redis)")
    print(f"  turn ends          {_ms(r['turn'])}   all ended by {r['all_ended_s']:.1f} s, {r['turns_ok']} answered")
    print(f"  failures           {f['total']}" + "".join(f"   {k} {v}" for k, v in f.items() if k != "total"))
    print(f"  wait before model  {_ms(m['wait_before_model'])}")
    print(f"  after model ended  {_ms(m['after_model'])}")
    print(f"  model requests     {m['requests']} ({m['streamed']} streamed), at most {m['max_concurrent']} at once")
    for name in ("idle", "run"):
        s = login[name]
        print(f"  GET /login {name:<5}   {_ms(s, ('p50', 'p99', 'max'))}   failed {s['failed']}")
    print(f"  /login p99 ratio   {login['ratio_p99']:.1f}x" if login["ratio_p99"] else "  /login p99 ratio   -")
    for name in ("before", "peak", "after"):
        s = mem[name]
        print(f"  memory {name:<6}      RSS gunicorn {s['gunicorn_mb']:.0f} MB ({s['gunicorn_processes']} processes)"
              f" + fake {s['fake_mb']:.0f} MB = {s['total_mb']:.0f} MB   (PSS {s['gunicorn_pss_mb']:.0f} + "
              f"{s['fake_pss_mb']:.0f} MB)")
    fw = r["first_words"]
    if fw:
        print(f"  first words        {_ms(fw)}   missing {fw['missing']}")
    else:
        print("  first words        not measured: GET /api/conversations/{id}/events is no event stream (today: 404)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--words", type=int, default=20)
    parser.add_argument("--database-url", "--pg", dest="database_url", default=None)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle /login samples")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds the run may last")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.seconds, args.idle, args.limit = min(args.n, 20), 0.5, 2.0, 60.0
    result = run(args.n, args.seconds, args.words, args.database_url or temp_sqlite(), args.redis, args.idle,
                 args.limit)
    if not args.json:
        show(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
