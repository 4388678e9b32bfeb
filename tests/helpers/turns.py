"""alice's API client, and her turns with each pass run by the test itself as a worker runs it:
with `app_config` here, the turns go to Dramatiq over the test Redis and nothing takes them
(tests/test_round_trips.py; tests/test_turns.py takes the client only)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import Run, User
from tests.conftest import api_headers


@pytest.fixture
def app_config() -> dict[str, Any]:
    # A long text window: a reply's first words go out at once and the rest with its step's end,
    # whatever the machine's speed (the count of text events does not depend on timing).
    return {"TURNS_RUNNER": "dramatiq", "EVENTS_TEXT_EVERY_MS": 600_000}


@pytest.fixture
def api(app: Any) -> Any:
    """alice's client credential: (test client, headers)."""
    from app.auth import create_token

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        headers = api_headers(create_token(alice, scope="client"))
    return app.test_client(), headers


def new_conversation(api: Any) -> int:
    client, headers = api
    return int(client.post("/api/conversations", json={}, headers=headers).get_json()["id"])


def send(api: Any, convo: int, text: str) -> Any:
    client, headers = api
    answer = client.post(
        f"/api/conversations/{convo}/messages", json={"text": text}, headers={**headers, "Prefer": "respond-async"}
    )
    assert answer.status_code == 202, answer.get_data(as_text=True)
    return answer.get_json()


def run_pass(app: Any, run_id: int) -> None:
    """The job, as the worker runs it."""
    from app.copilot.turns import execute

    asyncio.run(execute(app, run_id))


def status_of(app: Any, run_id: int) -> str:
    with app.app_context():
        return str(db.session.get(Run, run_id).status)  # type: ignore[union-attr]


def handed_over(app: Any, api: Any, convo: int, text: str = "hello there") -> Any:
    """POST a streamed message as the ASGI server serves it (the view on the server's loop): its
    Handoff, which the test ends itself (no stream, and no pass unless the test runs it)."""
    from app.api.streamed import SERVER
    from app.api.turn_server import Exchange, TurnServer

    client, headers = api

    async def post() -> Any:
        exchange = Exchange(TurnServer(app), asyncio.get_running_loop())
        answer = client.post(
            f"/api/conversations/{convo}/messages",
            json={"text": text},
            headers={**headers, "Accept": "text/event-stream"},
            environ_base={SERVER: exchange},
        )
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert exchange.taken is not None and exchange.taken.run_id is not None and exchange.taken.local
        exchange.taken.cancel()
        return exchange.taken

    return asyncio.run(post())


def noted_runner(app: Any, monkeypatch: Any) -> list[int]:
    """The production runner (jobs to Redis, for a worker: none runs here) in the app's place, each
    job it queued noted, in order: the list it notes them in."""
    from app.copilot.turns import _jobs as jobs

    runner, submitted = jobs.Dramatiq(app), []
    send = runner.submit
    monkeypatch.setattr(runner, "submit", lambda run_id: (send(run_id), submitted.append(run_id)))
    monkeypatch.setitem(app.extensions, "turns", runner)
    return submitted


@contextlib.contextmanager
def housekeeping(app: Any) -> Iterator[None]:
    """A worker's housekeeping (turns._pass.keep_alive) in a thread while the block runs."""
    import threading

    from app.copilot.turns._pass import keep_alive
    from tests.services import WAIT

    done = threading.Event()
    thread = threading.Thread(target=keep_alive, args=(app, done), daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(WAIT)
