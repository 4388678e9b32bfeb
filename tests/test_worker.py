"""The production shape's worker (`flask --app wsgi worker`, Dramatiq over the tests' Redis) runs
turns from another process; killed mid-turn, the turn ends `interrupted` with Retry, and the retry
goes on from what already ran: nothing runs twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Message, Post, Run, User
from tests.conftest import REDIS_URL, api_headers
from tests.fake_llm import FakeOpenAI
from tests.services import WAIT, eventually

ROOT = Path(__file__).resolve().parent.parent
# A pass says it is alive every HEARTBEAT s (its mark lasts 3 × HEARTBEAT + 1 s), and one silent
# past DEAD_AFTER s with no mark is swept as interrupted. Short, so the killed worker is noticed
# quickly; yet the live worker's mark outlasts a 10 s stall of its event loop on a loaded machine
# (at 1 s it was 4 s: a slow machine could have its live turn swept).
HEARTBEAT, DEAD_AFTER = 3, 3


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def app_config(fake: FakeOpenAI) -> dict[str, Any]:
    return {
        "TURNS_RUNNER": "dramatiq",
        "COUNTERSIGN_MODEL": "openai:fake-gpt",
        "COUNTERSIGN_MODEL_BASE_URL": fake.api_base,
        "TURN_HEARTBEAT": HEARTBEAT,
        "TURN_DEAD_AFTER": DEAD_AFTER,
    }


@contextmanager
def worker(database_url: str, fake: FakeOpenAI) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "testing",
        "SECRET_KEY": "test-secret-key",
        "DATABASE_URL": database_url,
        "REDIS_URL": REDIS_URL,
        "SWEEP_ON_START": "0",
        "COUNTERSIGN_MODEL": "openai:fake-gpt",
        "COUNTERSIGN_MODEL_BASE_URL": fake.api_base,
        "COUNTERSIGN_MODEL_API_KEY": "test-key",
        "TURN_HEARTBEAT": str(HEARTBEAT),
        "TURN_DEAD_AFTER": str(DEAD_AFTER),
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "flask"), "--app", "wsgi", "worker", "--threads", "4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=WAIT)  # Dramatiq lets its threads finish: seconds on a loaded machine
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=WAIT)


def test_a_worker_killed_mid_turn_leaves_it_interrupted_and_retry_runs_nothing_twice(app, database_url, fake):
    from app.auth import create_token

    draft = {"title": "From the worker", "body": "Written once.", "status": "draft"}
    fake.enqueue(fake.reply_tools(("draft_post", draft)), "hang", fake.reply_text("Drafted it."))
    with app.app_context():
        headers = api_headers(
            create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), scope="client")
        )
    client = app.test_client()
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    with worker(database_url, fake) as first:
        queued = client.post(
            f"/api/conversations/{convo}/messages", json={"text": "draft a post"}, headers={**headers, "Prefer": "respond-async"}
        )
        assert queued.status_code == 202
        eventually(lambda: len(fake.requests) == 2, "the worker's second model request (after draft_post ran)")
        first.send_signal(signal.SIGKILL)  # mid-turn: its model has not answered
        first.wait(timeout=WAIT)

    def run_status() -> str:
        client.get(f"/api/conversations/{convo}", headers=headers)  # a reader sweeps dead turns
        with app.app_context():
            return db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo))

    eventually(lambda: run_status() == "interrupted", "the dead worker's turn marked interrupted")
    shown = client.get(f"/api/conversations/{convo}", headers=headers).get_json()["messages"]
    assert shown[-1]["role"] == "error" and "interrupted" in shown[-1]["text"] and "Retry" in shown[-1]["text"]
    with worker(database_url, fake):
        retried = client.post(f"/api/conversations/{convo}/retry", json={}, headers=headers)
        assert retried.status_code == 200, retried.get_json()
        assert [m["text"] for m in retried.get_json()["messages"]] == ["Drafted it."]
    with app.app_context():
        drafts = db.session.scalar(sa.select(sa.func.count()).select_from(Post).where(Post.title == "From the worker"))
        roles = list(db.session.scalars(sa.select(Message.role).where(Message.conversation_id == convo).order_by(Message.id)))
    assert drafts == 1  # draft_post ran once: the retry went on from its result
    assert len(fake.requests) == 3
    last = fake.requests[-1]["messages"]
    assert [m["role"] for m in last][-2:] == ["assistant", "tool"]  # it goes on from draft_post's result
    assert last[-2]["tool_calls"][0]["function"]["name"] == "draft_post" and "saved" in last[-1]["content"]
    assert roles == ["user", "notice", "assistant"]  # the interruption's note stays, without its Retry


def test_idle_task_threads_wake_once_a_second_while_the_consumer_polls_every_100_ms(app):
    """A worker's task threads wait on its in-process queue (a job wakes one at once); only the
    consumer's interval decides how soon a queued task is picked up. Dramatiq's worker polls only
    the task queue: the turn queue is the PassLoop's (test_pass_loop.py), and no job is ever
    delayed, so the delay queue (`tasks.DQ`), which Dramatiq's worker would poll as often, is not."""
    from app.copilot.turns import _jobs as jobs

    worker = jobs._worker(app.extensions["turns"].broker, threads=3)
    worker.start()
    try:
        assert [thread.timeout for thread in worker.workers] == [jobs.THREAD_WAKE_MS / 1000] * 3
        assert {consumer.worker_timeout for consumer in worker.consumers.values()} == {jobs.CONSUMER_WAKE_MS}
        assert set(worker.consumers) == {jobs.TASKS}
    finally:
        worker.stop()


def test_a_delayed_job_is_refused_when_sent_as_no_worker_would_ever_run_it(app):
    from dramatiq.common import dq_name

    from app.copilot.turns import _jobs as jobs

    runner = app.extensions["turns"]
    with pytest.raises(ValueError, match="would never run"):
        runner.actor.send_with_options(args=(1,), delay=1000)
    assert [runner.broker.do_qsize(queue) for queue in (jobs.QUEUE, dq_name(jobs.QUEUE))] == [0, 0]  # (nothing queued)


PRELOAD = """
import json, sys
from app import create_app
from app.copilot import worker
from app.copilot.turns import _jobs as jobs
app = create_app({
    "COUNTERSIGN_ENV": "testing", "SECRET_KEY": "fresh", "SWEEP_ON_START": False,
    "SQLALCHEMY_DATABASE_URI": "sqlite:///:memory:", "REDIS_URL": sys.argv[1], "TURNS_RUNNER": "dramatiq",
    "COUNTERSIGN_MODEL": "openai:fake-gpt", "COUNTERSIGN_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
})
SDK = ("openai", "pydantic_ai.models.openai")
before = [name for name in SDK if name in sys.modules]
def taking_jobs(*args, **kwargs):  # where the worker would start taking jobs: stop there
    print(json.dumps({"before": before, "taking_jobs": [name for name in SDK if name in sys.modules]}))
    raise SystemExit(0)
jobs.passes = taking_jobs
worker(app, 1)
"""


def test_a_worker_imports_its_models_sdk_before_its_first_job_not_on_it():
    """A worker's passes share one event loop: a first pass importing the OpenAI SDK (about 1.5 s
    on these machines) held up every pass the worker had taken. copilot.worker() loads it first."""
    import json

    out = subprocess.run([sys.executable, "-c", PRELOAD, REDIS_URL], cwd=ROOT, capture_output=True, text=True, timeout=WAIT)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {"before": [], "taking_jobs": ["openai", "pydantic_ai.models.openai"]}
