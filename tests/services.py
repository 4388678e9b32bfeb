"""Servers of a test's own: a free port, a Redis and a PostgreSQL it may stop and restart without
touching anyone else's, and gunicorn hosts serving the app over real HTTP; and the waits for them."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WAIT = 60  # seconds for something that must happen (past it: a broken app, not a slow machine)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = WAIT, proc: subprocess.Popen[Any] | None = None) -> None:
    """Until something listens on the port: a server process starting on a loaded machine may take
    many seconds (imports, connections). A `proc` that exits meanwhile fails at once (its port was
    taken, or it crashed) rather than at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def eventually(check: Callable[[], Any], what: str, seconds: float = WAIT) -> Any:
    """check()'s first truthy answer, asked every 0.1 s; an AssertionError naming `what` if none
    comes within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never happened within {seconds} s: {what}")


# For a client of a PrivateRedis. Its stop() closes the port, so a call then fails at once
# (refused), with no wait; a short timeout would only misread a busy machine's slow answer as "down".
REDIS_TIMEOUTS = {"socket_timeout": WAIT, "socket_connect_timeout": WAIT}


class PrivateRedis:
    """A redis-server of the test's own, so it can be stopped without touching anyone else's."""

    def __init__(self, directory: Path) -> None:
        self.port, self.dir = free_port(), directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(timeout=WAIT)


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (initdb in a temporary folder, its own port), so it
    can be stopped and started under a running app. Owned by the postgres user when we are root,
    as PostgreSQL refuses to run as root."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
        if not bins:
            raise RuntimeError("PostgreSQL's server binaries are not installed (apt-get install postgresql)")
        self.bin = bins[-1].parent
        self.dir = Path(tempfile.mkdtemp(prefix="countersign-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._as_owner(f"{self.bin}/initdb -D {self.data} -U postgres --auth=trust --no-sync")
        self.start()

    def _as_owner(self, command: str) -> None:
        argv = ["su", "postgres", "-s", "/bin/sh", "-c", command] if os.geteuid() == 0 else ["sh", "-c", command]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_owner(f"{self.bin}/pg_ctl -D {self.data} -l {self.dir}/server.log -o '{options}' -w start")

    def stop(self) -> None:
        self._as_owner(f"{self.bin}/pg_ctl -D {self.data} -m fast -w stop")

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def gunicorn_hosts(env: dict[str, str], count: int = 1, workers: int = 2, app: str = "wsgi:app") -> Iterator[list[int]]:
    """`count` gunicorn processes ("hosts"), each on its own port, serving the app with `env`, and
    the production shape's turn worker (`flask --app wsgi worker`) when env has a REDIS_URL."""
    ports = [free_port() for _ in range(count)]
    bin_dir = Path(sys.executable).parent
    procs = [
        subprocess.Popen(
            [str(bin_dir / "gunicorn"), "-w", str(workers), "-b", f"127.0.0.1:{port}", app],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    if env.get("REDIS_URL") and env.get("TURNS_RUNNER", "dramatiq") == "dramatiq":
        procs.append(
            subprocess.Popen(
                [str(bin_dir / "flask"), "--app", "wsgi", "worker", "--threads", "8"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        for port, proc in zip(ports, procs, strict=False):
            wait_for_port(port, proc=proc)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            # Gunicorn lets its workers finish, the turn worker its jobs: seconds on a loaded machine.
            try:
                proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=WAIT)


def call(port: int, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    """One JSON request with a bearer token, on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            method,
            path,
            body=json.dumps(body or {}),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()
