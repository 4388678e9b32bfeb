"""Every setting Countersign reads, from environment variables, in one place."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instance"


def _env(name: str, default: str | None = None) -> str | None:
    """Read NAME, or FLASK_NAME / COUNTERSIGN_NAME, in that order."""
    for key in (name, f"FLASK_{name}", f"COUNTERSIGN_{name}"):
        value = os.environ.get(key)
        if value not in (None, ""):
            return value
    return default


def _int(name: str, default: int) -> int:
    return int(_env(name, str(default)) or default)


def _bool(name: str, default: bool) -> bool:
    raw = _env(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def load(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the app's config from the environment, then apply overrides (tests)."""
    overrides = dict(overrides or {})
    env = overrides.get("COUNTERSIGN_ENV") or _env("COUNTERSIGN_ENV") or "production"
    development = env in {"development", "testing"}

    secret = overrides.get("SECRET_KEY") or _env("SECRET_KEY")
    if not secret:
        if not development:
            raise RuntimeError(
                "SECRET_KEY is not set. Set SECRET_KEY to a long random string, "
                "or COUNTERSIGN_ENV=development to run with a throwaway key."
            )
        secret = secrets.token_urlsafe(32)

    model = _env("COUNTERSIGN_MODEL", "offline") or "offline"
    # The provider's usual key variable, unless a Countersign-specific one is set.
    provider_key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(model.partition(":")[0])
    fallbacks = [k for k in (_env("SECRET_KEY_FALLBACKS") or "").split(",") if k]
    default_db = f"sqlite:///{INSTANCE / 'countersign.sqlite3'}"

    config: dict[str, Any] = {
        "COUNTERSIGN_ENV": env,
        "SECRET_KEY": secret,
        "SECRET_KEY_FALLBACKS": fallbacks,
        # AUDIT_KEY keys the audit chain (never stored in the database); AUDIT_KEY_FALLBACKS: older keys.
        **_audit_keys(overrides.get("SECRET_KEY") or _env("SECRET_KEY"), fallbacks),
        "SQLALCHEMY_DATABASE_URI": _normalise_db_url(_env("DATABASE_URL", default_db) or default_db),
        "REDIS_URL": _env("REDIS_URL"),
        "APPROVALS_TTL": _int("APPROVALS_TTL", 1800),
        "APPROVALS_MAX_PENDING_PER_RUN": _int("APPROVALS_MAX_PENDING_PER_RUN", 5),
        # Across all of a person's runs, so an agent starting run after run cannot flood them.
        "APPROVALS_MAX_PENDING_PER_PERSON": _int("APPROVALS_MAX_PENDING_PER_PERSON", 20),
        # A claimed approval still "running" after this long belongs to a dead process.
        "APPROVALS_INTERRUPTED_AFTER": _int("APPROVALS_INTERRUPTED_AFTER", 600),
        "COUNTERSIGN_MODEL": model,
        "COUNTERSIGN_MODEL_BASE_URL": _env("COUNTERSIGN_MODEL_BASE_URL"),
        "COUNTERSIGN_MODEL_API_KEY": _env("MODEL_API_KEY") or (os.environ.get(provider_key) if provider_key else None),
        "COUNTERSIGN_MODEL_TIMEOUT": float(_env("MODEL_TIMEOUT", "60") or 60),
        "COUNTERSIGN_MAX_STEPS": _int("COUNTERSIGN_MAX_STEPS", 8),
        "COUNTERSIGN_TOOLSETS": [t for t in (_env("COUNTERSIGN_TOOLSETS", "blog,mail,files") or "").split(",") if t],
        "FILES_ROOT": _env("FILES_ROOT", str(INSTANCE / "files")),
        "SMTP_URL": _env("SMTP_URL"),
        "TELEGRAM_BOT_TOKEN": _env("TELEGRAM_BOT_TOKEN"),
        "TELEGRAM_WEBHOOK_SECRET": _env("TELEGRAM_WEBHOOK_SECRET"),
        "TELEGRAM_API_BASE": _env("TELEGRAM_API_BASE", "https://api.telegram.org"),
        "SLACK_BOT_TOKEN": _env("SLACK_BOT_TOKEN"),
        "SLACK_SIGNING_SECRET": _env("SLACK_SIGNING_SECRET"),
        "SLACK_API_BASE": _env("SLACK_API_BASE", "https://slack.com/api"),
        "EMAIL_WEBHOOK_SECRET": _env("EMAIL_WEBHOOK_SECRET"),
        # An inbound email with no SPF/DKIM/DMARC verdict from the provider is from nobody (refused,
        # unanswered); False only for a provider that gives none, knowing a forged From is then believed.
        "EMAIL_REQUIRE_AUTH": _bool("EMAIL_REQUIRE_AUTH", True),
        # Seconds a chat thread waits for "yes" (never longer than the card's own life).
        "CONNECTOR_CONFIRM_TTL": _int("CONNECTOR_CONFIRM_TTL", 120),
        # Connectors that may take "yes" for an answer; the others post a link to the card.
        "CONNECTORS_CONFIRM_BY_REPLY": [
            c for c in (_env("CONNECTORS_CONFIRM_BY_REPLY", "telegram,slack,email") or "").split(",") if c
        ],
        "PUBLIC_URL": _env("PUBLIC_URL", "http://127.0.0.1:5000"),
        # MCP: request-state keys (first seals, all unseal; ≥ 32 bytes), hosts and origins allowed.
        "MCP_STATE_KEYS": [k for k in (_env("MCP_STATE_KEYS") or "").split(",") if k]
        or [hashlib.sha256(f"mcp-state:{secret}".encode()).hexdigest()],
        "MCP_ALLOWED_HOSTS": (_env("MCP_ALLOWED_HOSTS", "127.0.0.1:*,localhost:*") or "").split(","),
        "MCP_ALLOWED_ORIGINS": (_env("MCP_ALLOWED_ORIGINS", "http://127.0.0.1:*,http://localhost:*") or "").split(","),
        "MAIL_FROM": _env("MAIL_FROM", "countersign@localhost"),
        "RATELIMIT_ENABLED": _bool("RATELIMIT_ENABLED", True),
        "RATELIMIT_STORAGE_URI": _env("REDIS_URL") or "memory://",
        "RATELIMIT_HEADERS_ENABLED": True,
        # Redis down: count limits in this process's memory rather than fail the request.
        "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": True,
        # Proxies in front of the app whose X-Forwarded-For is believed (1 behind one load balancer);
        # 0 believes no one, so a client cannot pick the address its limits count against.
        "TRUSTED_PROXIES": _int("TRUSTED_PROXIES", 0),
        # Each limit counts per person (token or account) and per client address, web and API together.
        "RATELIMIT_MESSAGES_PER_PERSON": _env("RATELIMIT_MESSAGES_PER_PERSON", "60 per minute"),
        "RATELIMIT_MESSAGES_PER_ADDRESS": _env("RATELIMIT_MESSAGES_PER_ADDRESS", "120 per minute"),
        "RATELIMIT_ANSWERS_PER_PERSON": _env("RATELIMIT_ANSWERS_PER_PERSON", "30 per minute"),
        "RATELIMIT_ANSWERS_PER_ADDRESS": _env("RATELIMIT_ANSWERS_PER_ADDRESS", "60 per minute"),
        "RATELIMIT_MCP_CALLS_PER_TOKEN": _env("RATELIMIT_MCP_CALLS_PER_TOKEN", "60 per minute"),
        # Failed sign-ins block their source address; per account they only slow down, and the
        # person's known addresses and device cookies skip that (app/auth/signin.py): after
        # SIGNIN_SLOWDOWN_AFTER failures, 1 s, 2 s, 4 s … up to the cap.
        "RATELIMIT_SIGNIN_FAILURES_PER_ADDRESS": _env("RATELIMIT_SIGNIN_FAILURES_PER_ADDRESS", "10 per minute"),
        "SIGNIN_SLOWDOWN_AFTER": _int("SIGNIN_SLOWDOWN_AFTER", 5),
        "SIGNIN_SLOWDOWN_CAP": _int("SIGNIN_SLOWDOWN_CAP", 60),
        # A message longer than this is refused, saying the limit (never cut).
        "MESSAGE_MAX_CHARS": _int("MESSAGE_MAX_CHARS", 4000),
        "WTF_CSRF_TIME_LIMIT": None,
        "MAX_CONTENT_LENGTH": _int("MAX_CONTENT_LENGTH", 1024 * 1024),
        "WTF_CSRF_SSL_STRICT": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": _bool("SESSION_COOKIE_SECURE", not development),
        "REMEMBER_COOKIE_HTTPONLY": True,
        # A browser sign-in ends server-side after this many seconds even without a sign-out (a
        # copied cookie does not live for ever); signing out or `users sign-out` ends it at once.
        "SESSION_MAX_AGE": _int("SESSION_MAX_AGE", 7 * 24 * 3600),
        "SQLALCHEMY_ENGINE_OPTIONS": {},
        "SWEEP_ON_START": _bool("SWEEP_ON_START", True),
        # Turns are jobs (app/copilot/jobs.py): `dramatiq` (a worker process; the default with
        # REDIS_URL), `pool` (in this process; the default without) or `inline` (the test kit).
        "TURNS_RUNNER": _env("TURNS_RUNNER", ""),
        "TURNS_CONCURRENCY": _int("TURNS_CONCURRENCY", 64),  # passes a pool runs at once
        "WORKER_THREADS": _int("WORKER_THREADS", 256),  # passes one worker process runs at once
        "TURN_TIMEOUT": _int("TURN_TIMEOUT", 600),  # seconds one pass may take before the queue ends it
        "TURN_HEARTBEAT": _int("TURN_HEARTBEAT", 10),  # seconds between a running pass's "still here"
        "TURN_DEAD_AFTER": _int("TURN_DEAD_AFTER", 60),  # silent this long: its worker died (interrupted)
        # A POST that starts a turn waits this long for it by default (RFC 7240 Prefer: wait=N asks less).
        "TURN_WAIT": _int("TURN_WAIT", 25),
        # Each conversation's live events: a Redis Stream of at most EVENTS_MAXLEN entries, gone
        # EVENTS_TTL seconds after its last; an open stream says it is alive every EVENTS_HEARTBEAT s.
        "EVENTS_MAXLEN": _int("EVENTS_MAXLEN", 2000),
        "EVENTS_TTL": _int("EVENTS_TTL", 86400),
        "EVENTS_HEARTBEAT": _int("EVENTS_HEARTBEAT", 15),
        "EVENTS_STREAM_SECONDS": _int("EVENTS_STREAM_SECONDS", 300),  # then the client reconnects
        # Open event streams one person may hold (each holds a web thread), and how often an open
        # stream checks that its session or token is still live.
        "EVENTS_MAX_STREAMS_PER_PERSON": _int("EVENTS_MAX_STREAMS_PER_PERSON", 8),
        "EVENTS_RECHECK": _int("EVENTS_RECHECK", 5),
        "BENCH_PROBE": _bool("BENCH_PROBE", False),
    }
    config.update(overrides)
    config["SQLALCHEMY_DATABASE_URI"] = _normalise_db_url(config["SQLALCHEMY_DATABASE_URI"])
    if config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        # Wait for a writer rather than fail at once: confirms race on purpose.
        config["SQLALCHEMY_ENGINE_OPTIONS"] = {
            "connect_args": {"timeout": 30},
            **config["SQLALCHEMY_ENGINE_OPTIONS"],
        }
    else:
        # A restarted database server leaves dead connections in the pool: test each one on checkout.
        config["SQLALCHEMY_ENGINE_OPTIONS"] = {"pool_pre_ping": True, **config["SQLALCHEMY_ENGINE_OPTIONS"]}
    return config


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
