"""Fixtures: a real database (SQLite file or PostgreSQL), a real Redis, the app,
a signed-in client helper, and scripted models."""

from __future__ import annotations

import functools
import os
import re
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from jinja2 import BytecodeCache
from werkzeug.security import generate_password_hash

from app import create_app
from app.cli import DEMO_PASSWORD, seed_demo
from app.extensions import db
from app.models import Approval, Conversation, Run, User, utcnow
from tests.helpers.demo import DemoTemplate, empty_tables
from tests.helpers.engines import share_engines
from tests.helpers.routing import share_builders

# Under pytest-xdist each worker ("gw0", "gw1", …) has databases of its own: Redis database
# N - k for worker k (the suite empties its Redis database before every test) and PostgreSQL
# database NAME_wk, made on first use. Without xdist the URLs are used as they are.
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw-1")[2:])


def for_worker(redis_url: str, database_url: str, worker: int) -> tuple[str, str]:
    """The (Redis, PostgreSQL) URLs of worker `worker` (-1: no xdist, the URLs unchanged)."""
    if worker < 0:
        return redis_url, database_url
    base, _, number = redis_url.rpartition("/")
    if not number.isdigit() or int(number) < worker:
        raise pytest.UsageError(f"{redis_url} leaves no Redis database for xdist worker {worker}: name one >= {worker}")
    if database_url.startswith("postgres"):
        head, _, tail = database_url.partition("?")
        database_url = f"{head}_w{worker}" + (f"?{tail}" if tail else "")
    return f"{base}/{int(number) - worker}", database_url


# The suite's temporary files (the SQLite database among them) in memory when the machine has a
# memory-backed /dev/shm and TMPDIR names no other place: every SQLite commit waits for the disk
# otherwise, which took a third of the suite's time on a busy disk. Set TMPDIR to choose.
if "TMPDIR" not in os.environ and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
    os.environ["TMPDIR"] = "/dev/shm"  # the processes the tests start inherit it
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

REDIS_URL, DATABASE_URL = for_worker(
    os.environ.get("COUNTERSIGN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    os.environ.get("COUNTERSIGN_TEST_DATABASE_URL", ""),
    WORKER,
)
share_builders()  # each test's app reuses the URL builders the first app compiled
share_engines()  # and the engine (its compiled statements) of the first app with its options
TOKEN = re.compile(r'name="token" value="([^"]+)"')
CSRF = re.compile(r'"X-CSRFToken": "([^"]+)"')


class NetworkGuardError(OSError):
    """A test tried to reach a non-loopback address."""


def _loopback(address: Any) -> bool:
    if isinstance(address, str | bytes):  # a unix socket path
        return True
    host = address[0]
    return host in ("localhost", "::1") or str(host).startswith("127.")


@pytest.fixture(autouse=True, scope="session")
def no_internet() -> Iterator[None]:
    """Fail any connection to an address that is not on this machine, before a packet leaves."""
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            raise NetworkGuardError(f"tests may not reach {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            raise NetworkGuardError(f"tests may not reach {address!r}")
        return real_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex  # type: ignore[method-assign]


@pytest.fixture(autouse=True, scope="session")
def redis_settled() -> None:
    """A Redis that started less than a pass's "still here" lasts takes no pass for dead (it may
    have restarted empty: turns._sweep): on a Redis started just before the suite, the suite
    waits until it has been up that long, once, so the tests that sweep dead passes find it so."""
    import redis as redis_py

    from app.config import SETTINGS
    from app.copilot.turns._runs import alive_for

    heartbeat = next(s.default for s in SETTINGS if s.key == "TURN_HEARTBEAT")
    client = redis_py.Redis.from_url(REDIS_URL)
    try:
        while int(client.info("server")["uptime_in_seconds"]) < alive_for(heartbeat):
            time.sleep(0.5)
    except redis_py.RedisError:
        pass  # (no Redis: the tests that need it say so themselves)
    finally:
        client.close()


# Modules whose tests start processes or servers of their own, run many examples, or build and
# lint the whole tree: the fast lanes (`./scripts/test --quick` and `--sqlite`) leave them out. A
# test of another module that starts a process of its own is marked `slow` where it is written.
SLOW_MODULES = {
    "test_concurrency.py",
    "test_docs.py",
    "test_faults.py",
    "test_fuzz.py",
    "test_interrupted.py",
    "test_lint.py",
    "test_mcp.py",
    "test_mcp_bad_input_and_rate_limit.py",
    "test_mcp_sessions.py",
    "test_migrations.py",
    "test_models_http.py",
    "test_printed_commands.py",
    "test_streamed_turns.py",
    "test_rate_limits.py",
    "test_redis_restart.py",
    "test_signin_lockout.py",
    "test_two_hosts.py",
    "test_worker.py",
}


# Modules whose tests use the database but run in the fast lane all the same: a few quick ones
# that take a message, a card and its answer end to end, so the lane between edits goes through
# the engine as a person does (`./scripts/test --quick` runs the tests marked `quick`).
QUICK_MODULES = {
    "test_invariants.py",
}


def uses_the_database(item: pytest.Item) -> bool:
    """Whether a test reads or writes the suite's database: through the `database_url` fixture, or
    in a module that reads the suite's DATABASE_URL itself (test_migrations.py, test_faults.py)."""
    return "database_url" in getattr(item, "fixturenames", ()) or hasattr(getattr(item, "module", None), "DATABASE_URL")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        elsewhere = item.get_closest_marker("slow") or item.get_closest_marker("browser")
        if not elsewhere and (item.path.name in QUICK_MODULES or not uses_the_database(item)):
            item.add_marker(pytest.mark.quick)
        if hasattr(getattr(item, "module", None), "mcp_process"):
            # One MCP server process per module (tests/helpers/mcp.py): with `--dist loadgroup`
            # (./scripts/test) the module's tests run on one xdist worker, so it starts once.
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    if os.environ.get("COUNTERSIGN_TEST_DATABASE_ONLY"):
        # ./scripts/test's PostgreSQL pass: the tests that use no database run the same on both
        # passes (nothing they do depends on it), so they run once, in the SQLite pass.
        left_out = [item for item in items if not uses_the_database(item)]
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if uses_the_database(item)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A browser test that fails says what its page showed and what the server had sent (a flake
    on a busy CI machine is then read from its report, not guessed at)."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    page = next((v for v in funcargs.values() if type(v).__name__ == "Page" and hasattr(v, "evaluate")), None)
    if report.when == "call" and report.failed and page is not None:
        from tests.helpers.browser import what_the_page_showed

        report.sections.append(("what the page showed", what_the_page_showed(page, funcargs.get("app"))))
    return report


def pytest_report_header() -> list[str]:
    return [f"database: {DATABASE_URL or 'sqlite (temporary file)'}", f"redis: {REDIS_URL}"]


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One database for the session, migrated from empty with the real Alembic revisions."""
    url = DATABASE_URL or f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.sqlite3'}"
    if WORKER >= 0 and url.startswith("postgres"):
        create_database(url)
    app = create_app(base_config(url))
    with app.app_context():
        db.session.remove()
        with db.engine.begin() as conn:
            db.metadata.drop_all(conn)
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        from flask_migrate import upgrade

        upgrade()
        if url.startswith("postgres"):
            # The tests' database need not survive a crash of its server: a commit that does not
            # wait for its WAL to reach the disk saves the suite minutes on a busy disk.
            with db.engine.begin() as conn:
                name = conn.scalar(sa.text("SELECT current_database()"))
                conn.execute(sa.text(f'ALTER DATABASE "{name}" SET synchronous_commit TO off'))
        db.engine.dispose()
    return url


def create_database(url: str) -> None:
    """Create the PostgreSQL database that `url` names when it is missing (an xdist worker's own)."""
    from app.config import _normalise_db_url

    head, _, tail = url.partition("?")
    server, _, name = head.rpartition("/")
    admin_url = _normalise_db_url(f"{server}/postgres" + (f"?{tail}" if tail else ""))
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if conn.scalar(sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}) is None:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()


def base_config(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "COUNTERSIGN_ENV": "testing",
        "SECRET_KEY": "test-secret-key",
        "SQLALCHEMY_DATABASE_URI": url,
        "REDIS_URL": REDIS_URL,
        "RATELIMIT_ENABLED": False,
        "SWEEP_ON_START": False,
        "SESSION_COOKIE_SECURE": False,
        # Turns run in the request that queues them, so a test reads the reply in the response;
        # tests of the queue itself (tests/test_turns.py) use the pool and a real worker.
        "TURNS_RUNNER": "inline",
        # With a queue (pool, dramatiq), a request that waits for its turn answers 202 after
        # TURN_WAIT: a test expecting the turn's messages must not get 202 from a slow machine.
        "TURN_WAIT": 60,
        "OFFLINE_WORD_PAUSE_MS": 0,  # the demo's pause between the offline model's words
        # The platforms' APIs at a closed local port, never their real hosts: a test that posts to
        # Telegram or Slack without the fakes (tests/fake_chat.py) fails the same way everywhere.
        "TELEGRAM_API_BASE": "http://127.0.0.1:9",
        "SLACK_API_BASE": "http://127.0.0.1:9",
        **extra,
    }


@pytest.fixture
def app_config() -> dict[str, Any]:
    """Override in a test module to change settings."""
    return {}


class SharedBytecode(BytecodeCache):
    """Jinja's compiled templates, kept for the whole test process: each test's new app would
    otherwise parse and compile every template it renders again. Jinja checks each template's
    source against its checksum, so an edited template is compiled afresh."""

    def __init__(self) -> None:
        self.stored: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Any) -> None:
        if bucket.key in self.stored:
            bucket.bytecode_from_string(self.stored[bucket.key])

    def dump_bytecode(self, bucket: Any) -> None:
        self.stored[bucket.key] = bucket.bytecode_to_string()


TEMPLATES = SharedBytecode()


@functools.cache
def quick_demo_hash() -> str:
    """The demo password hashed with scrypt, as in production, at a work factor of 2**10 instead of
    werkzeug's 2**15: a sign-in's check then costs about 4 ms of CPU instead of about 150, and
    the tests sign in over a thousand times. A test marked production_password_hash gets the
    default (a test of what a sign-in costs)."""
    return generate_password_hash(DEMO_PASSWORD, method="scrypt:1024:8:1")


@pytest.fixture(scope="session")
def demo_template(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> DemoTemplate:
    """The demo's rows and files as `seed_demo` makes them (with the tests' cheaper password hash),
    made once per test process: each test's `app` starts from a copy (tests/helpers/demo.py)."""
    import app.cli.demo as cli_demo

    template = DemoTemplate(tmp_path_factory.mktemp("demo-files"))
    made = create_app(base_config(database_url))
    real_hash, cli_demo._demo_hash = cli_demo._demo_hash, quick_demo_hash  # type: ignore[assignment]
    try:
        template.take(made)
    finally:
        cli_demo._demo_hash = real_hash
        with made.app_context():
            db.engine.dispose()
    return template


@pytest.fixture
def app(
    database_url: str,
    demo_template: DemoTemplate,
    app_config: dict[str, Any],
    tmp_path: Any,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Flask]:
    app = create_app(base_config(database_url, **{"FILES_ROOT": str(tmp_path / "files"), **app_config}))
    app.jinja_env.bytecode_cache = TEMPLATES
    production_hash = request.node.get_closest_marker("production_password_hash") is not None
    if not production_hash:
        monkeypatch.setattr("app.cli.demo._demo_hash", quick_demo_hash)
    with app.app_context():
        if production_hash:
            empty_tables()
            seed_demo()
        else:
            demo_template.restore(app.config["FILES_ROOT"])
        db.session.remove()
        from app.extensions import redis_client

        redis_client.client.flushdb()  # the tests' own Redis database: waits, dedupe keys, queue
    from app.logs import Sparing

    for sparing in Sparing.made:  # (a warning another test said is said again here)
        sparing.forget()
    yield app
    runner = app.extensions["turns"]
    if hasattr(runner, "wait_idle"):
        runner.wait_idle(60)  # a turn still running would hold a connection past the pool's disposal
    runner.close()
    for kept in ("events_kept", "turns_unsent"):  # (what a test left kept: its sender thread ends)
        app.extensions.get(kept, []).clear()
    for name in ("redis", "redis_blocking"):  # their sockets closed now, not whenever a GC cycle finds them
        pool = getattr(app.extensions.get(name), "connection_pool", None)
        if pool is not None:
            pool.disconnect()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def people(app: Flask) -> dict[str, int]:
    from app.models import User

    with app.app_context():
        return {u.email.split("@")[0]: u.id for u in db.session.scalars(sa.select(User))}


@pytest.fixture
def add_post(app: Flask) -> Any:
    """Add a post by alice (in tenant acme) and return its id."""
    from app.models import Post, User

    def add(title: str, status: str = "draft") -> int:
        with app.app_context():
            alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
            post = Post(tenant_id=alice.tenant_id, author_id=alice.id, title=title, status=status)
            db.session.add(post)
            db.session.commit()
            return post.id

    return add


@pytest.fixture
def posts(app: Flask) -> dict[str, int]:
    from app.models import Post

    with app.app_context():
        return {p.title: p.id for p in db.session.scalars(sa.select(Post))}


class Person:
    """A browser-like client: signs in through the form and sends CSRF like htmx does."""

    def __init__(self, app: Flask, email: str, password: str = "demo") -> None:
        self.app = app
        self.client: FlaskClient = app.test_client()
        page = self.client.get("/login").get_data(as_text=True)
        csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
        assert csrf, "login page has no CSRF token"
        response = self.client.post("/login", data={"email": email, "password": password, "csrf_token": csrf.group(1)})
        assert response.status_code == 302, f"sign-in failed for {email}"
        self.csrf = CSRF.search(self.client.get("/").get_data(as_text=True)).group(1)  # type: ignore[union-attr]

    def htmx_post(self, url: str, **data: Any) -> Any:
        return self.client.post(url, data=data, headers={"HX-Request": "true", "X-CSRFToken": self.csrf})

    def new_conversation(self) -> int:
        response = self.client.post("/conversations", headers={"X-CSRFToken": self.csrf})
        return int(response.headers["Location"].rsplit("/", 1)[-1])

    def say(self, conversation: int, text: str) -> str:
        response = self.htmx_post(f"/c/{conversation}/messages", text=text)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_data(as_text=True)

    def card(self, html: str) -> tuple[str, str]:
        """The (approval id, token) of the last pending card in the HTML."""
        ids = re.findall(r'id="approval-([0-9a-f]{32})"', html)
        tokens = TOKEN.findall(html)
        assert ids and tokens, "no pending card in the response"
        return ids[-1], tokens[-1]

    def answer(self, approval: str, token: str, decision: str = "confirm") -> Any:
        return self.htmx_post(f"/approvals/{approval}/{decision}", token=token)


class Browser:
    """A sign-in form at one client address (the test client's REMOTE_ADDR)."""

    def __init__(self, app, address="127.0.0.1", headers=None, query=None):
        self.client = app.test_client()
        self.client.environ_base["REMOTE_ADDR"] = address
        self.headers, self.query = headers or {}, query
        page = self.client.get("/login", query_string=query).get_data(as_text=True)
        self.csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)

    def sign_in(self, email, password):
        return self.client.post(
            "/login",
            data={"email": email, "password": password, "csrf_token": self.csrf},
            headers=self.headers,
            query_string=self.query,
        )


@pytest.fixture
def sign_in(app: Flask) -> Any:
    return lambda email, password="demo": Person(app, email, password)


@pytest.fixture
def alice(sign_in: Any) -> Person:
    return sign_in("alice@example.com")


@pytest.fixture
def handle_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count DeletePost.handle() runs (the thing that must happen at most once)."""
    from app.actions.delete_post import DeletePost

    calls = {"n": 0}
    original = DeletePost.handle

    def counted(self: Any, ctx: Any, input: Any) -> Any:
        calls["n"] += 1
        return original(self, ctx, input)

    monkeypatch.setattr(DeletePost, "handle", counted)
    return calls


@pytest.fixture(scope="module")
def smtp() -> Iterator[Any]:
    """A local SMTP server (aiosmtpd) keeping every message, one per test module: point the app
    at it with `app_config` returning {"SMTP_URL": smtp.url}."""
    from tests.fake_chat import FakeSmtp

    server = FakeSmtp()
    yield server
    server.close()


@pytest.fixture
def model(app: Flask) -> Any:
    """A QueuedModel in place of the app's model: enqueue its answers, read what it was sent."""
    from app.copilot import engine
    from app.copilot.kit import QueuedModel

    queued = QueuedModel()
    with app.app_context():
        engine().use_model(queued)
    return queued


@pytest.fixture
def streamed(app: Flask) -> Any:
    """A StreamedModel (tests/streamed.py) in place of the app's model: its words stream, and a
    reply can wait on a gate the test opens."""
    from app.copilot import engine
    from tests.streamed import StreamedModel

    model = StreamedModel()
    with app.app_context():
        engine().use_model(model)
    return model


def outcome_row(label: str, status: str) -> str:
    """A decided card's outcome row as the web shows it: the label, and the status as a badge."""
    return f'<span class="card__label">{label}</span> <span class="badge badge--{status}">{status}</span>'


def api_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_approvals(app, n, email="alice@example.com", status="pending", prefix="a"):
    """n approval rows for one person, straight into the tables (fast), created a second apart;
    returns their ids."""
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == email))
        convo = Conversation(tenant_id=user.tenant_id, user_id=user.id)
        db.session.add(convo)
        db.session.flush()
        run = Run(conversation_id=convo.id, status="paused")
        db.session.add(run)
        db.session.flush()
        now = utcnow()
        db.session.execute(
            sa.insert(Approval),
            [
                {
                    "id": f"{prefix}{i:031x}",
                    "tenant_id": user.tenant_id,
                    "user_id": user.id,
                    "run_id": run.id,
                    "conversation_id": convo.id,
                    "tool_call_id": f"c{i}",
                    "step": 1,
                    "action": "delete_post",
                    "type": "confirm",
                    "arguments": {"post": i},
                    "reason": "Delete this post? This cannot be undone.",
                    "rows": [{"label": "Post", "value": f"P{i}"}],
                    "digest": "0" * 64,
                    "status": status,
                    "created_at": now - timedelta(seconds=n - i),
                    "expires_at": now + timedelta(hours=1),
                }
                for i in range(n)
            ],
        )
        db.session.commit()
    return [f"{prefix}{i:031x}" for i in range(n)]


# The browser tests' fixtures (their steps are in tests/helpers/browser.py). -------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per test module; every test gets a fresh context of its own (`page`), so no
    cookie or storage crosses from one test to the next. Not one per session: Playwright's sync
    API leaves its event loop marked as running in this thread until it stops, and the tests after
    it (an inline turn, an MCP client) call asyncio.run(), which refuses to start then (and
    clearing the mark breaks Playwright's connection): stopping at the module's end clears it."""
    from pathlib import Path

    from tests.helpers.browser import CHROMIUM, LONG

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install chromium-headless-shell (or set CHROMIUM_PATH)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=LONG)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def server(app: Flask) -> Iterator[str]:
    """The test's app served over HTTP on a free local port, for a browser (MCP's tests have a
    `server` of their own: tests/helpers/mcp.py)."""
    import threading
    import time

    from werkzeug.serving import make_server

    from tests.helpers.browser import LONG

    # An open event stream notices its page has gone at its next heartbeat (a write to a closed
    # socket fails): four a second here, so the wait for its thread below is short.
    app.config["EVENTS_HEARTBEAT"] = 0.25
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    httpd.daemon_threads = False  # socketserver then keeps each request's thread (in _threads)
    # (shutdown() waits for the loop's next look at its flag: every 50 ms, not socketserver's 500)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    thread.join(timeout=5)
    # A request still running (an inline turn, a card's expiry) would write into the next test's
    # tables while they are emptied: the test ends when its requests have.
    deadline = time.monotonic() + LONG / 1000
    threads = getattr(httpd, "_threads", None)  # (a list once a request came; before, a stand-in)
    for request in list(threads) if isinstance(threads, list) else []:
        request.join(max(0.0, deadline - time.monotonic()))
    httpd.server_close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    """A fresh browser context's page (its own cookies), with the test's server running."""
    from tests.helpers.browser import LONG, WATCH

    context = browser.new_context(viewport={"width": 1100, "height": 760})
    context.add_init_script(WATCH)
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.set_default_timeout(LONG)
    yield page
    context.close()


@pytest.fixture
def shots(tmp_path: Any) -> Any:
    """Where a browser test saves its screenshots: docs/screenshots with COUNTERSIGN_SCREENSHOTS=1."""
    from tests.helpers.browser import DOCS_SCREENSHOTS

    target = DOCS_SCREENSHOTS if os.environ.get("COUNTERSIGN_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    return target
