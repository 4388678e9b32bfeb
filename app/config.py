"""Every setting Countersign reads, from environment variables, in one place."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instance"

Kind = Literal["text", "int", "float", "bool", "list", "raw_list", "fixed", "derived"]


@dataclass(frozen=True)
class Setting:
    """One config key: how its environment variable is read (kind) and the value when it is unset.

    The variable is the key itself unless `variable` names another; either way NAME, FLASK_NAME and
    COUNTERSIGN_NAME are tried (_env). `list` is comma-separated with empty items dropped; `raw_list`
    keeps them. `fixed` reads nothing (the default is the value); `derived` is worked out from other
    settings in _derived()."""

    key: str
    kind: Kind
    default: Any = None
    variable: str | None = None


# Rows in the config dict's order, which is also the reading order: of two bad values, the first row's is reported.
SETTINGS: tuple[Setting, ...] = (
    Setting("COUNTERSIGN_ENV", "derived"),
    Setting("SECRET_KEY", "derived"),
    Setting("SECRET_KEY_FALLBACKS", "list"),
    # AUDIT_KEY keys the audit chain (never stored in the database); AUDIT_KEY_FALLBACKS: older keys.
    Setting("AUDIT_KEY", "derived"),
    Setting("AUDIT_KEY_FALLBACKS", "derived"),
    Setting("SQLALCHEMY_DATABASE_URI", "text", f"sqlite:///{INSTANCE / 'countersign.sqlite3'}", "DATABASE_URL"),
    Setting("REDIS_URL", "text"),
    Setting("APPROVALS_TTL", "int", 1800),
    Setting("APPROVALS_MAX_PENDING_PER_RUN", "int", 5),
    # The person's own requests across all her runs (her agents' are capped apart, below).
    Setting("APPROVALS_MAX_PENDING_PER_PERSON", "int", 20),
    # Cards the person's agents (agent tokens, MCP) may hold pending for her, all together; they
    # do not count toward her own cap above, so an agent cannot use it up.
    Setting("APPROVALS_MAX_PENDING_FROM_AGENTS", "int", 10),
    # A claimed approval still "running" after this long belongs to a dead process.
    Setting("APPROVALS_INTERRUPTED_AFTER", "int", 600),
    Setting("COUNTERSIGN_MODEL", "text", "offline"),
    Setting("COUNTERSIGN_MODEL_BASE_URL", "text"),
    Setting("COUNTERSIGN_MODEL_API_KEY", "derived"),
    Setting("COUNTERSIGN_MODEL_TIMEOUT", "float", 60, "MODEL_TIMEOUT"),
    Setting("COUNTERSIGN_MAX_STEPS", "int", 8),
    # The offline model writes its answer a word at a time, this many ms apart, so the demo shows
    # a reply streaming as a real model's does (0: at once).
    Setting("OFFLINE_WORD_PAUSE_MS", "int", 30),
    Setting("COUNTERSIGN_TOOLSETS", "list", "blog,mail,files"),
    Setting("FILES_ROOT", "text", str(INSTANCE / "files")),
    Setting("SMTP_URL", "text"),
    Setting("TELEGRAM_BOT_TOKEN", "text"),
    Setting("TELEGRAM_WEBHOOK_SECRET", "text"),
    Setting("TELEGRAM_API_BASE", "text", "https://api.telegram.org"),
    Setting("TELEGRAM_BOT_USERNAME", "text", ""),
    Setting("SLACK_BOT_TOKEN", "text"),
    Setting("SLACK_SIGNING_SECRET", "text"),
    Setting("SLACK_API_BASE", "text", "https://slack.com/api"),
    Setting("EMAIL_WEBHOOK_SECRET", "text"),
    Setting("LINK_CODE_TTL", "int", 600),
    Setting("CARDS_UNSEEN_AFTER", "int", 120),
    # An inbound email with no SPF/DKIM/DMARC verdict from the provider is from nobody (refused,
    # unanswered); False only for a provider that gives none, knowing a forged From is then believed.
    Setting("EMAIL_REQUIRE_AUTH", "bool", True),
    # Seconds a chat thread waits for "yes" (never longer than the card's own life).
    Setting("CONNECTOR_CONFIRM_TTL", "int", 120),
    # Connectors that may take "yes" for an answer; the others post a link to the card.
    Setting("CONNECTORS_CONFIRM_BY_REPLY", "list", "telegram,slack,email"),
    Setting("PUBLIC_URL", "text", "http://127.0.0.1:5000"),
    # MCP: request-state keys (first seals, all unseal; ≥ 32 bytes), hosts and origins allowed.
    Setting("MCP_STATE_KEYS", "derived"),
    Setting("MCP_ALLOWED_HOSTS", "raw_list", "127.0.0.1:*,localhost:*"),
    Setting("MCP_ALLOWED_ORIGINS", "raw_list", "http://127.0.0.1:*,http://localhost:*"),
    Setting("MAIL_FROM", "text", "countersign@localhost"),
    Setting("RATELIMIT_ENABLED", "bool", True),
    Setting("RATELIMIT_STORAGE_URI", "text", "memory://", "REDIS_URL"),
    Setting("RATELIMIT_HEADERS_ENABLED", "fixed", True),
    # Redis down: count limits in this process's memory rather than fail the request.
    Setting("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", "fixed", True),
    # Proxies in front of the app whose X-Forwarded-For is believed (1 behind one load balancer);
    # 0 believes no one, so a client cannot pick the address its limits count against.
    Setting("TRUSTED_PROXIES", "int", 0),
    # Each limit counts per person (token or account) and per client address, web and API together.
    Setting("RATELIMIT_MESSAGES_PER_PERSON", "text", "60 per minute"),
    Setting("RATELIMIT_MESSAGES_PER_ADDRESS", "text", "120 per minute"),
    Setting("RATELIMIT_ANSWERS_PER_PERSON", "text", "30 per minute"),
    Setting("RATELIMIT_ANSWERS_PER_ADDRESS", "text", "60 per minute"),
    Setting("RATELIMIT_MCP_CALLS_PER_TOKEN", "text", "60 per minute"),
    # Failed sign-ins block their source address; per account they only slow down, and the
    # person's known addresses and device cookies skip that (app/auth/signin.py): after
    # SIGNIN_SLOWDOWN_AFTER failures, 1 s, 2 s, 4 s … up to the cap.
    Setting("RATELIMIT_SIGNIN_FAILURES_PER_ADDRESS", "text", "10 per minute"),
    Setting("SIGNIN_SLOWDOWN_AFTER", "int", 5),
    Setting("SIGNIN_SLOWDOWN_CAP", "int", 60),
    # A message longer than this is refused, saying the limit (never cut).
    Setting("MESSAGE_MAX_CHARS", "int", 4000),
    Setting("WTF_CSRF_TIME_LIMIT", "fixed", None),
    Setting("MAX_CONTENT_LENGTH", "int", 1024 * 1024),
    Setting("WTF_CSRF_SSL_STRICT", "fixed", True),
    Setting("SESSION_COOKIE_HTTPONLY", "fixed", True),
    Setting("SESSION_COOKIE_SAMESITE", "fixed", "Lax"),
    Setting("SESSION_COOKIE_SECURE", "derived"),
    Setting("REMEMBER_COOKIE_HTTPONLY", "fixed", True),
    # A browser sign-in ends server-side after this many seconds even without a sign-out (a
    # copied cookie does not live for ever); signing out or `users sign-out` ends it at once.
    Setting("SESSION_MAX_AGE", "int", 7 * 24 * 3600),
    Setting("SQLALCHEMY_ENGINE_OPTIONS", "fixed", {}),
    Setting("SWEEP_ON_START", "bool", True),
    Setting("LOG_LEVEL", "text", "INFO"),  # the app's own log lines from this level (app/logs.py)
    # Turns are jobs (app/copilot/jobs.py): `dramatiq` (a worker process; the default with
    # REDIS_URL), `pool` (in this process; the default without) or `inline` (the test kit).
    Setting("TURNS_RUNNER", "text", ""),
    Setting("TURNS_CONCURRENCY", "int", 64),  # passes a pool runs at once
    Setting("WORKER_THREADS", "int", 256),  # passes one worker process runs at once
    Setting("WORKER_TASK_THREADS", "int", 8),  # connector deliveries one worker process runs at once
    Setting("TURN_TIMEOUT", "int", 600),  # seconds one pass may take before its worker cancels it
    Setting("TURN_HEARTBEAT", "int", 10),  # seconds between a running pass's "still here"
    Setting("TURN_DEAD_AFTER", "int", 60),  # silent this long: its worker died (interrupted)
    # A POST that starts a turn waits this long for it by default (RFC 7240 Prefer: wait=N asks less).
    Setting("TURN_WAIT", "int", 25),
    # Each conversation's live events: a Redis Stream of at most EVENTS_MAXLEN entries, gone
    # EVENTS_TTL seconds after its last; an open stream with nothing to send says it is alive (an
    # SSE comment) every EVENTS_HEARTBEAT s, or every EVENTS_RECHECK s when that is shorter.
    Setting("EVENTS_MAXLEN", "int", 2000),
    Setting("EVENTS_TTL", "int", 86400),
    Setting("EVENTS_HEARTBEAT", "int", 15),
    Setting("EVENTS_STREAM_SECONDS", "int", 300),  # then the client reconnects
    # A reply's words go out at most this often (ms) while it streams: its first words at once,
    # the words that come sooner together with the next (each event costs every open stream).
    Setting("EVENTS_TEXT_EVERY_MS", "int", 200),
    # ... and a process streaming many replies sends about this many text events a second in all:
    # each reply's words then go out less often, in larger parts (the first words still at once;
    # 0: not shared).
    Setting("EVENTS_TEXT_PER_SECOND", "int", 100),
    # Open event streams one person may hold (each holds a web thread), and how often an open
    # stream checks that its session or token is still live.
    Setting("EVENTS_MAX_STREAMS_PER_PERSON", "int", 8),
    Setting("EVENTS_RECHECK", "int", 5),
    # Seconds between the admin console's looks for changes (its counts, queue and table).
    Setting("ADMIN_POLL", "int", 5),
    Setting("BENCH_PROBE", "bool", False),
)

# The provider's usual key variable, read for the model's key unless MODEL_API_KEY is set.
PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def _env(name: str, default: str | None = None) -> str | None:
    """Read NAME, or FLASK_NAME / COUNTERSIGN_NAME, in that order."""
    for key in (name, f"FLASK_{name}", f"COUNTERSIGN_{name}"):
        value = os.environ.get(key)
        if value not in (None, ""):
            return value
    return default


def _int(name: str, default: int) -> int:
    return int(_env(name, str(default)) or default)


def _float(name: str, default: float) -> float:
    return float(_env(name, str(default)) or default)


def _bool(name: str, default: bool) -> bool:
    raw = _env(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _list(name: str, default: str | None = None) -> list[str]:
    return [item for item in (_env(name, default) or "").split(",") if item]


def _raw_list(name: str, default: str | None = None) -> list[str]:
    return (_env(name, default) or "").split(",")


READERS: dict[str, Callable[[str, Any], Any]] = {
    "text": _env,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "list": _list,
    "raw_list": _raw_list,
    "fixed": lambda name, default: default,
}


def _read(setting: Setting) -> Any:
    """One setting's value from the environment, by its kind (not for `derived`)."""
    return READERS[setting.kind](setting.variable or setting.key, setting.default)


def load(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the app's config from the environment, then apply overrides (tests)."""
    overrides = dict(overrides or {})
    given_secret = overrides.get("SECRET_KEY") or _env("SECRET_KEY")
    env = overrides.get("COUNTERSIGN_ENV") or _env("COUNTERSIGN_ENV") or _default_env(given_secret)
    development = env in {"development", "testing"}
    secret = given_secret or _throwaway_secret(development)
    read = {s.key: _read(s) for s in SETTINGS if s.kind != "derived"}
    derived = _derived(env, development, secret, given_secret, read)
    config = {s.key: derived[s.key] if s.kind == "derived" else read[s.key] for s in SETTINGS}
    config.update(overrides)
    config["SQLALCHEMY_DATABASE_URI"] = _normalise_db_url(config["SQLALCHEMY_DATABASE_URI"])
    config["SQLALCHEMY_ENGINE_OPTIONS"] = _engine_options(config["SQLALCHEMY_DATABASE_URI"], config["SQLALCHEMY_ENGINE_OPTIONS"])
    if config["EMAIL_WEBHOOK_SECRET"] and not config["SMTP_URL"]:  # (each answer would fail: a 500 when Redis is away)
        raise RuntimeError(
            "EMAIL_WEBHOOK_SECRET is set but SMTP_URL is not: the email connector would take mail in and "
            "answer nobody (no reply, no card). Set SMTP_URL, or unset EMAIL_WEBHOOK_SECRET."
        )
    return config


def _default_env(given_secret: str | None) -> str:
    """`production`, unless COUNTERSIGN_DEMO=1 (the `.flaskenv` that scripts/demo writes, read by the
    `flask` command only) and nothing of a deployment is set: no SECRET_KEY, DATABASE_URL or
    REDIS_URL. So the demo's printed commands run on its development settings, and a server that
    has a stray `.flaskenv` still runs on production's (or refuses to start without SECRET_KEY)."""
    deployed = given_secret or _env("DATABASE_URL") or _env("REDIS_URL")
    return "development" if _bool("COUNTERSIGN_DEMO", False) and not deployed else "production"


def _throwaway_secret(development: bool) -> str:
    """A random SECRET_KEY for development; anywhere else a missing one stops the start."""
    if not development:
        raise RuntimeError(
            "SECRET_KEY is not set. Set SECRET_KEY to a long random string, "
            "or COUNTERSIGN_ENV=development to run with a throwaway key."
        )
    return secrets.token_urlsafe(32)


def _derived(env: str, development: bool, secret: str, given_secret: str | None, read: dict[str, Any]) -> dict[str, Any]:
    """The `derived` rows of SETTINGS, worked out from the environment's name, the keys and other settings."""
    provider_key = PROVIDER_KEYS.get(read["COUNTERSIGN_MODEL"].partition(":")[0])
    return {
        "COUNTERSIGN_ENV": env,
        "SECRET_KEY": secret,
        **_audit_keys(given_secret, read["SECRET_KEY_FALLBACKS"]),
        "COUNTERSIGN_MODEL_API_KEY": _env("MODEL_API_KEY") or (os.environ.get(provider_key) if provider_key else None),
        "MCP_STATE_KEYS": _list("MCP_STATE_KEYS") or [hashlib.sha256(f"mcp-state:{secret}".encode()).hexdigest()],
        "SESSION_COOKIE_SECURE": _bool("SESSION_COOKIE_SECURE", not development),
    }


def _engine_options(url: str, given: dict[str, Any]) -> dict[str, Any]:
    """SQLAlchemy's engine options for this database, the given ones winning. The pool's callers on
    an event loop wait for a connection briefly at most (app/loop_pool.py)."""
    from app.loop_pool import LoopWaitsBriefly

    if url.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        # Wait for a writer rather than fail at once: confirms race on purpose. (An in-memory
        # database has one connection, which Flask-SQLAlchemy's StaticPool shares.)
        in_memory = make_url(url).database in (None, "", ":memory:") or "mode=memory" in url
        return {"connect_args": {"timeout": 30}, **({} if in_memory else {"poolclass": LoopWaitsBriefly}), **given}
    # A restarted database server leaves dead connections in the pool: each one is tested on
    # checkout by the BEGIN of its transaction (app/pg_checkout.py), not by a ping of its own.
    return {"poolclass": LoopWaitsBriefly, **given}


def _audit_keys(secret: str | None, secret_fallbacks: list[str]) -> dict[str, Any]:
    """AUDIT_KEY, by default derived from SECRET_KEY under a label of its own (production should set
    its own); with no SECRET_KEY (development) a fixed development key, so the demo's chain still
    verifies after a restart. AUDIT_KEY_FALLBACKS: comma-separated older keys that rows may have been
    made with; `default` there stands for the keys derived from SECRET_KEY and SECRET_KEY_FALLBACKS."""

    def derived(key: str) -> str:
        return hmac.new(key.encode(), b"countersign audit-chain key v1", hashlib.sha256).hexdigest()

    defaults = [derived(k) for k in (secret or "development only: no SECRET_KEY", *secret_fallbacks)]
    own = _env("AUDIT_KEY")
    fallbacks: list[str] = []
    for key in (_env("AUDIT_KEY_FALLBACKS") or "").split(","):
        fallbacks += defaults if key.strip() == "default" else [key] if key else []
    if not own:
        fallbacks += defaults[1:]  # a SECRET_KEY rotation rotates the derived key: old rows still verify
    return {"AUDIT_KEY": own or defaults[0], "AUDIT_KEY_FALLBACKS": fallbacks}


def _normalise_db_url(url: str) -> str:
    """Accept postgres:// and postgresql:// and use psycopg 3 for both."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url
