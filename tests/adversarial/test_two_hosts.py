"""Two hosts (two gunicorn processes on their own ports) share one database and one Redis: a card
made through one is confirmed through the other, and 32 confirms spread over both run it once."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import AuditEvent, Post, User
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hosts(app, database_url):
    env = {**os.environ, "COUNTERSIGN_ENV": "testing", "SECRET_KEY": "test-secret-key", "DATABASE_URL": database_url,
           "REDIS_URL": REDIS_URL, "SWEEP_ON_START": "0", "RATELIMIT_ENABLED": "0"}
    ports, procs = [free_port(), free_port()], []
    for port in ports:
        procs.append(subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "-w", "2", "-b", f"127.0.0.1:{port}", "wsgi:app"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for port in ports:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    yield ports
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def call(port, method, path, token, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=json.dumps(body or {}),
                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    conn.close()
    return response.status, data


def test_a_card_made_on_one_host_is_confirmed_once_across_both(app, hosts, posts):
    a, b = hosts
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")))
    _, convo = call(a, "POST", "/api/conversations", token)
    _, turn = call(a, "POST", f"/api/conversations/{convo['id']}/messages", token,
                   {"text": f"/delete_post post={posts['Spring meetup']}"})
    prompt = turn["pending"][0]
    start, codes, lock = threading.Barrier(32), [], threading.Lock()

    def press(port):
        start.wait()
        status, _ = call(port, "POST", f"/api/approvals/{prompt['id']}/confirm", token, {"token": prompt["token"]})
        with lock:
            codes.append(status)

    threads = [threading.Thread(target=press, args=(hosts[i % 2],)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] + [409] * 31
    with app.app_context():
        done = db.session.scalars(sa.select(AuditEvent.outcome).where(
            AuditEvent.approval_id == prompt["id"], AuditEvent.event == "approval.decided")).all()
        assert done == ["done"]  # decided once, by one process on one host
        assert db.session.get(Post, posts["Spring meetup"]) is None
