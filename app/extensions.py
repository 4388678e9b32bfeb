"""Unbound extension instances; create_app binds them to an app."""

from __future__ import annotations

import functools
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar, cast

import click
import redis
import sqlalchemy as sa
from flask import Flask, current_app, g, request
from flask.cli import with_appcontext
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager, current_user
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from htmx_flask import Htmx
from limits import parse
from redis.exceptions import RedisError
from sqlalchemy.orm import DeclarativeBase

from app.errors import WouldWait

log = logging.getLogger(__name__)


class Base(DeclarativeBase):
    metadata = sa.MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


db = SQLAlchemy(model_class=Base)


Params = dict[str, Any] | list[dict[str, Any]] | None  # one row's bound parameters, or many rows'


def won(statement: sa.Update, params: dict[str, Any] | None = None) -> bool:
    """Run a conditional UPDATE (with `params` for its bound parameters: a statement built once,
    at import, costs a fifth of one built per call); True when it changed exactly one row (this
    caller won). It leaves the session's objects alone (see core)."""
    return bool(core(statement, params).rowcount == 1)


def core(statement: sa.Executable, params: Params = None) -> Any:  # (a CursorResult; Any: its rows are untyped)
    """Run a statement as Core, on the session's own connection and in its transaction: rows of
    columns, never of objects, and nothing the session holds is changed or synchronized by it.
    What every turn runs goes this way: session.execute() costs two to three times as much CPU
    for the same statement (its ORM layer: 2026-12-07, SQLite, an UPDATE 82 against 33 µs, an
    INSERT … RETURNING 230 against 63 µs). Pending objects are flushed first, as
    session.execute() would (unless autoflush is off)."""
    session = db.session()
    if session.autoflush:
        session.flush()
    return session.connection().execute(statement, params)


# A request served on the ASGI process's event loop may not wait there for a lock: every stream of
# the process would wait with it. While `on_loop` holds an OnLoop, any statement or commit that
# meets a lock another transaction holds (lock_busy: PostgreSQL's `FOR UPDATE NOWAIT`; any lock,
# a table's too, past LOOP_LOCK_WAIT_MS, no_lock_wait below; SQLite's write lock the same) raises
# WouldWait instead (_lock_met_on_loop), noted in it: nothing was kept, and the server runs the
# request again in a thread, where it waits (app/api/turn_server.py), its environ marked AGAIN:
# its rate limits counted it the first time. (AGAIN is no header's name: no client can set it.)
class OnLoop:
    """A request tried on the loop: the locks it met (then it is run again in a thread), and
    whether it committed anything (then it never is: it would be kept twice; a lock met after
    its commit is an error like any other)."""

    def __init__(self) -> None:
        self.locks: list[str] = []
        self.committed = False


on_loop: ContextVar[OnLoop | None] = ContextVar("countersign_on_loop", default=None)


@sa.event.listens_for(sa.orm.Session, "after_commit")
def _committed_on_loop(_session: sa.orm.Session) -> None:
    tried = on_loop.get()
    if tried is not None:
        tried.committed = True


@sa.event.listens_for(sa.engine.Engine, "handle_error")
def _lock_met_on_loop(context: sa.engine.ExceptionContext) -> None:
    """Every engine's errors, a read's as a write's or a commit's (raising here replaces the error:
    SQLAlchemy's handle_error; the request's teardown rolls its transaction back)."""
    tried = on_loop.get()
    if tried is None or tried.committed or not lock_busy(context.sqlalchemy_exception or context.original_exception):
        return
    tried.locks.append(str(context.original_exception).splitlines()[0] if str(context.original_exception) else "a lock")
    raise WouldWait() from context.original_exception


AGAIN = "countersign.again"


# A pass's write tried on an event loop (turns._writes.written), and a request tried there
# (on_loop), may not wait there for a lock either. While `no_lock_wait` is set, a connection
# checked out waits LOOP_LOCK_WAIT_MS at most for one (SQLite's busy timeout, until the connection
# goes back to the pool; PostgreSQL's lock_timeout, for its transaction), then fails with
# lock_busy(); the write or request is undone and run again in a thread, where it waits. Another
# writer's commit lets a lock go within a few milliseconds; a lock held longer (another process's
# long transaction) no longer holds up the loop.
no_lock_wait: ContextVar[bool] = ContextVar("countersign_no_lock_wait", default=False)
LOOP_LOCK_WAIT_MS = 10


# The database away: its server gone or refusing (OperationalError, a lock held past the wait
# among them), or no pooled connection free within pool_timeout. Never an action's own failure nor
# a text for a person or a client: a request answers the 503 of ServiceUnavailable, a pass fails
# for Retry.
DATABASE_AWAY = (sa.exc.OperationalError, sa.exc.TimeoutError)


def lock_busy(error: BaseException) -> bool:
    """Whether a database error says that a lock another transaction holds was not waited for
    (PostgreSQL's `FOR UPDATE NOWAIT` or lock_timeout: lock_not_available; SQLite's write lock,
    past the connection's busy timeout: SQLITE_BUSY and its extended codes)."""
    orig = getattr(error, "orig", None)
    if getattr(orig, "sqlstate", None) == "55P03":
        return True
    code = getattr(orig, "sqlite_errorcode", None) if isinstance(orig, sqlite3.OperationalError) else None
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def commit_kept(written: object | None = None, **values: Any) -> None:
    """Commit, leaving what the session holds readable as it was written: a request that answers
    with the rows it just wrote reads them without one SELECT per object. `written`, a row just
    changed by a Core UPDATE (won()), reads its new `values` from now on. (A value the database
    fills in itself, a server default, is still read on first use.)"""
    from sqlalchemy.orm.attributes import set_committed_value

    session = db.session()
    expiring, session.expire_on_commit = session.expire_on_commit, False
    try:
        session.commit()
    finally:
        session.expire_on_commit = expiring
    for name, value in values.items():
        set_committed_value(written, name, value)


login = LoginManager()
csrf = CSRFProtect()
htmx = Htmx()
limiter = Limiter(key_func=get_remote_address, default_limits=[])  # the client's address (ProxyFix)
View = TypeVar("View", bound=Callable[..., object])


def person_key() -> str:
    """Who a per-person limit counts: the bearer token, else the signed-in account, else the address."""
    token = g.get("api_token")
    if token is not None:
        return f"token:{token.id}"
    if current_user.is_authenticated:
        return f"user:{current_user.id}"
    return f"address:{get_remote_address()}"


def limit_per_person_and_address(kind: str) -> Callable[[View], View]:
    """Two limits on one kind of request (MESSAGES, ANSWERS), each shared by the web and the API
    routes of that kind: RATELIMIT_<KIND>_PER_PERSON and RATELIMIT_<KIND>_PER_ADDRESS."""
    per_person = limiter.shared_limit(
        lambda: current_app.config[f"RATELIMIT_{kind}_PER_PERSON"],
        scope=f"{kind.lower()}:person",
        key_func=person_key,
        exempt_when=_counted_already,
    )
    per_address = limiter.shared_limit(
        lambda: current_app.config[f"RATELIMIT_{kind}_PER_ADDRESS"], scope=f"{kind.lower()}:address", exempt_when=_counted_already
    )

    def decorate(view: View) -> View:
        return cast(View, per_address(per_person(view)))

    return decorate


def _counted_already() -> bool:
    """A request run again in a thread after it would have waited on the loop (on_loop)."""
    return bool(request.environ.get(AGAIN))


def seconds_over_limit(setting: str, key: str) -> int:
    """Count one call against the limit in config[setting] for `key`, outside a Flask view (MCP):
    0 if it is within the limit, else the seconds until the limit lets another through. The
    limit store being away lets the call through (as Flask-Limiter's own fallback does)."""
    if not limiter.enabled:
        return 0
    item = parse(current_app.config[setting])
    try:
        if limiter.limiter.hit(item, setting.lower(), key):
            return 0
        reset_at, _ = limiter.limiter.get_window_stats(item, setting.lower(), key)
    except RedisError as error:
        log.warning("rate limit store unavailable: %s", error)
        return 0
    return max(1, math.ceil(reset_at - time.time()))


class LazyMigrate:
    """Flask-Migrate, imported (with Alembic, a sixth of start-up) only when a `flask db` command
    or a test's upgrade() first reads it; it then takes its own place in app.extensions."""

    def __init__(self, app: Flask, directory: str) -> None:
        self.app, self.directory = app, directory

    def __getattr__(self, name: str) -> Any:
        from flask_migrate import Migrate

        Migrate(self.app, db, directory=self.directory)
        return getattr(self.app.extensions["migrate"], name)


class LazyMigrateCommands(click.Group):
    """`flask db …`, whose commands are Flask-Migrate's, imported when one is run or listed."""

    def _real(self) -> click.Group:
        from flask_migrate.cli import db as commands

        return commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._real().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._real().get_command(ctx, name)


@click.group(cls=LazyMigrateCommands, name="db")
@click.option("-d", "--directory", default=None, help='Migration script directory (default is "migrations")')
@click.option("-x", "--x-arg", multiple=True, help="Additional arguments consumed by custom env.py scripts")
@with_appcontext
def migrate_commands(directory: str | None, x_arg: tuple[str, ...]) -> None:
    """Perform database migrations (Flask-Migrate's own group, whose options it reads from g)."""
    g.directory = directory
    g.x_arg = x_arg


def init_migrate(app: Flask, directory: str) -> None:
    app.extensions["migrate"] = LazyMigrate(app, directory)
    app.cli.add_command(migrate_commands)


class RedisClient:
    """redis-py bound to REDIS_URL, or fakeredis in-process when it is unset (made on first use, so
    that start-up does not import it: P4)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def init_app(self, app: Flask) -> None:
        url = app.config.get("REDIS_URL")
        client = None
        if url:
            client = redis_from_url(url, socket_timeout=2, socket_connect_timeout=2)
        else:
            log.warning("REDIS_URL is not set: using in-process fakeredis (one process only).")
        app.extensions["redis"] = client

    @property
    def client(self) -> redis.Redis:
        client: redis.Redis | None = current_app.extensions["redis"]
        return client if client is not None else self._embedded(current_app.extensions)

    def _embedded(self, extensions: dict[str, Any]) -> redis.Redis:
        with self._lock:  # two threads' first use make one server, not two
            if extensions["redis"] is None:
                import fakeredis

                extensions["redis"] = fakeredis.FakeRedis()
            return extensions["redis"]  # type: ignore[no-any-return]


redis_client = RedisClient()


def redis_from_url(url: str, **options: Any) -> redis.Redis:
    """A redis-py client for url whose connections share one DriverInfo (what CLIENT SETINFO
    names): redis-py 8 otherwise reads its package metadata for every new connection, 0.27 ms of
    CPU each, and every open event stream holds a connection of its own. Each connection reads
    in 4 KB parts (READ_SIZE): hiredis's parser holds a buffer of that size for the connection's
    life, 64 KB by default, which 1,000 open streams would pay 64 MB for."""
    return redis.Redis.from_url(url, driver_info=_driver_info(), **{"socket_read_size": READ_SIZE, **options})


READ_SIZE = 4096  # a turn's events and a queue's jobs fit; a longer reply is read in several parts


@functools.cache
def _driver_info() -> Any:
    from redis.driver_info import DriverInfo

    return DriverInfo()
