"""Countersign: a Flask copilot whose risky actions wait for the person's countersignature."""

from __future__ import annotations

from app import startup  # first: the collector waits while the modules below import (P4)

# isort: split
import logging
import math
import time
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, g, jsonify, render_template, request
from flask_limiter import RateLimitExceeded
from sqlalchemy.exc import OperationalError, ProgrammingError
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from app import config as settings
from app import json_body, logs, no_nul, static_gzip
from app.copilot.text import seconds
from app.errors import CountersignError, CrossSite, ServiceUnavailable, TooManyAttempts
from app.extensions import (
    DATABASE_AWAY,
    LOOP_LOCK_WAIT_MS,
    csrf,
    db,
    htmx,
    init_migrate,
    limiter,
    login,
    no_lock_wait,
    redis_client,
)

log = logging.getLogger(__name__)
startup.imported()


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app: settings, extensions, blueprints, actions, commands."""
    with startup.held():
        return _build(config)


def _build(config: dict[str, Any] | None) -> Flask:
    app = Flask(
        __name__,
        instance_path=str(settings.INSTANCE),
        template_folder=str(settings.ROOT / "templates"),
        static_folder=str(settings.ROOT / "static"),
    )
    app.config.from_mapping(settings.load(config))
    logs.init_app(app)
    settings.INSTANCE.mkdir(parents=True, exist_ok=True)
    register_proxies(app)
    register_extensions(app)
    register_blueprints(app)
    register_errorhandlers(app)
    register_engine(app)
    register_commands(app)
    register_headers(app)
    json_body.init_app(app)
    no_nul.init_app(app)
    static_gzip.init_app(app)
    if app.config["SWEEP_ON_START"]:
        sweep_on_start(app)
    return app


def register_proxies(app: Flask) -> None:
    """Behind TRUSTED_PROXIES proxies (a load balancer: 1), the client's address is the one they
    add to X-Forwarded-For, so each client has its own rate limits; with 0 nobody is believed."""
    trusted = app.config["TRUSTED_PROXIES"]
    if trusted:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=trusted)  # type: ignore[method-assign]


def register_extensions(app: Flask) -> None:
    """The extensions (database, migrations, sign-in, CSRF, htmx, limiter, Redis) bound to this app."""
    from app import models  # noqa: F401  (tables must be known to Flask-Migrate)

    db.init_app(app)
    init_migrate(app, str(settings.ROOT / "migrations"))
    login.init_app(app)
    csrf.init_app(app)
    htmx.init_app(app)
    limiter.init_app(app)
    redis_client.init_app(app)
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        with app.app_context():
            _sqlite_pragmas()
    elif app.config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql+psycopg"):
        from app.pg_checkout import begin_on_checkout

        with app.app_context():
            begin_on_checkout(db.engine)


def _sqlite_pragmas() -> None:
    """WAL lets readers and one writer work at once; claims still serialize. (Once per engine: two
    apps may share one, as the tests' do.)"""
    import sqlalchemy as sa

    if not sa.event.contains(db.engine, "connect", _on_connect):
        sa.event.listen(db.engine, "connect", _on_connect)
        sa.event.listen(db.engine, "checkout", _wait_briefly_if_asked)
        sa.event.listen(db.engine, "checkin", _wait_again)


def _wait_briefly_if_asked(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """A pass's write or a request on an event loop (extensions.no_lock_wait): the connection
    waits for the write lock LOOP_LOCK_WAIT_MS at most, until it goes back to the pool."""
    if no_lock_wait.get():
        record.info["busy_timeout"] = dbapi_connection.execute("PRAGMA busy_timeout").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA busy_timeout = {LOOP_LOCK_WAIT_MS}")


def _wait_again(dbapi_connection: Any, record: Any) -> None:
    waited = record.info.pop("busy_timeout", None)
    if waited is not None and dbapi_connection is not None:
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(waited)}")


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")  # every commit waits for the disk, whatever the build's WAL default
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def register_blueprints(app: Flask) -> None:
    """Every delivery package's routes, the `<id:…>` converter, and the templates' globals."""
    from app.admin import bp as admin_bp
    from app.api import bp as api_bp
    from app.api.admin import bp as api_admin_bp
    from app.auth import bp as auth_bp
    from app.connectors import bp as connectors_bp
    from app.connectors import init_app as init_connectors
    from app.routing import RowIdConverter
    from app.status import ApprovalType, Decision, Role, Status
    from app.web import bp as web_bp

    app.url_map.converters["id"] = RowIdConverter  # before any rule that uses <id:…> is added
    # Templates compare the vocabulary's words by name, never by spelling.
    app.jinja_env.globals.update(Status=Status, Role=Role, ApprovalType=ApprovalType, Decision=Decision)
    app.register_blueprint(auth_bp)
    app.register_blueprint(web_bp)
    app.register_blueprint(admin_bp, url_prefix="/admin")
    app.register_blueprint(api_bp, url_prefix="/api")
    app.register_blueprint(api_admin_bp, url_prefix="/api/admin")
    app.register_blueprint(connectors_bp, url_prefix="/connectors")
    init_connectors(app)
    if app.config["BENCH_PROBE"]:
        from app.api.probe import bp as probe_bp

        app.register_blueprint(probe_bp, url_prefix="/api")


def register_errorhandlers(app: Flask) -> None:
    """Each domain error is one clear message and status: JSON for the API, a page otherwise."""

    def wants_json() -> bool:
        return request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json"

    @app.errorhandler(CountersignError)
    def domain_error(error: CountersignError) -> Any:
        headers = {"Retry-After": str(error.retry_after)} if isinstance(error, TooManyAttempts) else {}
        if error.status == 503:  # (the database briefly away, a lock met on the loop: a moment, as MCP says too)
            headers = {"Retry-After": "1"}
        if wants_json():
            fields = getattr(error, "fields", None)
            extra = {"fields": fields} if fields else {}
            return jsonify(error=type(error).__name__, message=error.message, **extra), error.status, headers
        if getattr(request, "htmx", False):  # swapped into the page: the note alone, not a whole page
            return render_template("partials/_error.html", message=error.message), error.status, headers
        return render_template("error.html", message=error.message), error.status, headers

    @app.errorhandler(RateLimitExceeded)
    def rate_limited(error: RateLimitExceeded) -> Any:
        current = limiter.current_limit
        wait = max(1, math.ceil(current.reset_at - time.time())) if current else 60
        what = error.description if error.limit.error_message else f"Too many requests ({error.description})."
        return domain_error(TooManyAttempts(f"{what} Try again in {seconds(wait)}.", wait))

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Any:
        """The API answers its 401s, 403s and 404s in its own JSON shape, as OpenAPI says."""
        if not request.path.startswith("/api/") or error.code is None or error.code < 400:
            return error
        return jsonify(error=type(error).__name__, message=error.description), error.code

    def database_down(error: Exception) -> Any:
        """extensions.DATABASE_AWAY: the server gone, a lock held past the wait, or no pooled
        connection free in time (every one held, by requests waiting for a lock)."""
        log.error("database error: %s", error)
        try:
            db.session.rollback()
        except OperationalError:
            pass  # the server is still away; the pool drops the dead connection
        g._login_user = login.anonymous_user()  # render the page without asking the database who this is
        return domain_error(ServiceUnavailable())

    for away in DATABASE_AWAY:
        app.register_error_handler(away, database_down)


def register_engine(app: Flask) -> None:
    """The engine: the actions discovered in ACTIONS_PACKAGE and the model COUNTERSIGN_MODEL names."""
    from app import copilot
    from app.copilot.actions import discover

    app.extensions["countersign"] = copilot.Engine(
        registry=discover(app.config.get("ACTIONS_PACKAGE", "app.actions")),
        model_spec=app.config["COUNTERSIGN_MODEL"],
        base_url=app.config["COUNTERSIGN_MODEL_BASE_URL"],
        api_key=app.config["COUNTERSIGN_MODEL_API_KEY"],
        timeout=app.config["COUNTERSIGN_MODEL_TIMEOUT"],
        word_pause=app.config["OFFLINE_WORD_PAUSE_MS"] / 1000,
        toolsets=app.config["COUNTERSIGN_TOOLSETS"],
        max_steps=app.config["COUNTERSIGN_MAX_STEPS"],
    )
    app.extensions["countersign.factory"] = create_app  # (`actions check` makes throwaway apps with it)
    copilot.init_app(app)


def register_commands(app: Flask) -> None:
    from app.cli import register

    register(app)


def register_headers(app: Flask) -> None:
    """Cross-site writes refused before anything reads them; security headers (CSP, no-sniff, referrer) on every response."""

    @app.before_request
    def refuse_cross_site_writes() -> Any:
        """Browsers say where a request comes from: a state-changing request from another site is
        refused before anything reads it (CSRF tokens are the second line). A bearer token is not
        ambient, so API calls that carry one are exempt."""
        if request.method in ("GET", "HEAD", "OPTIONS") or request.headers.get("Authorization"):
            return None
        if request.blueprint == "connectors":
            return None  # server-to-server webhooks, verified by their own signatures
        origin = request.headers.get("Origin")
        cross = request.headers.get("Sec-Fetch-Site") == "cross-site"
        if cross or (origin and _netloc(origin) != request.host):
            raise CrossSite()
        return None

    def _netloc(url: str) -> str | None:
        try:
            return urlsplit(url).netloc
        except ValueError:  # "http://[" is no origin a browser sends: it is not this site
            return None

    @app.after_request
    def security_headers(response: Any) -> Any:
        response.headers.setdefault(
            "Content-Security-Policy",
            # img-src and connect-src: our own origin only, so nothing on a page (a model's image,
            # a script's fetch) can send what it shows elsewhere (app.markdown never writes an img).
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        )
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


def sweep_on_start(app: Flask) -> None:
    """End approvals a dead process left claimed (never re-run them), and passes whose worker
    died (interrupted, with Retry)."""
    from app.copilot import sweep_dead, sweep_interrupted

    with app.app_context():
        try:
            ended = sweep_interrupted(app.config["APPROVALS_INTERRUPTED_AFTER"])
            dead = sweep_dead(app.config["TURN_DEAD_AFTER"])
        except (OperationalError, ProgrammingError):
            db.session.rollback()  # no tables yet: `flask db upgrade` has not run
            return
        if ended or dead:
            log.warning("marked %d approval(s) and %d turn(s) interrupted at start", len(ended), len(dead))
