"""Every setting Countersign reads, from environment variables, in one place."""

from __future__ import annotations

import hashlib
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
        "SQLALCHEMY_DATABASE_URI": _normalise_db_url(_env("DATABASE_URL", default_db) or default_db),
        "REDIS_URL": _env("REDIS_URL"),
        "APPROVALS_TTL": _int("APPROVALS_TTL", 1800),
        "APPROVALS_MAX_PENDING_PER_RUN": _int("APPROVALS_MAX_PENDING_PER_RUN", 5),
        # A claimed approval still "running" after this long belongs to a dead process.
        "APPROVALS_INTERRUPTED_AFTER": _int("APPROVALS_INTERRUPTED_AFTER", 600),
        "COUNTERSIGN_MODEL": model,
        "COUNTERSIGN_MODEL_BASE_URL": _env("COUNTERSIGN_MODEL_BASE_URL"),
        "COUNTERSIGN_MODEL_API_KEY": _env("MODEL_API_KEY") or (os.environ.get(provider_key) if provider_key else None),
        "COUNTERSIGN_MODEL_TIMEOUT": float(_env("MODEL_TIMEOUT", "60") or 60),
        "COUNTERSIGN_MAX_STEPS": _int("COUNTERSIGN_MAX_STEPS", 8),
        "COUNTERSIGN_TOOLSETS": [
            t for t in (_env("COUNTERSIGN_TOOLSETS", "blog,mail,files") or "").split(",") if t
        ],
        "FILES_ROOT": _env("FILES_ROOT", str(INSTANCE / "files")),
        "SMTP_URL": _env("SMTP_URL"),
        "TELEGRAM_BOT_TOKEN": _env("TELEGRAM_BOT_TOKEN"),
        "TELEGRAM_WEBHOOK_SECRET": _env("TELEGRAM_WEBHOOK_SECRET"),
        "TELEGRAM_API_BASE": _env("TELEGRAM_API_BASE", "https://api.telegram.org"),
        "SLACK_BOT_TOKEN": _env("SLACK_BOT_TOKEN"),
        "SLACK_SIGNING_SECRET": _env("SLACK_SIGNING_SECRET"),
        "SLACK_API_BASE": _env("SLACK_API_BASE", "https://slack.com/api"),
        "EMAIL_WEBHOOK_SECRET": _env("EMAIL_WEBHOOK_SECRET"),
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
        "WTF_CSRF_TIME_LIMIT": None,
        "MAX_CONTENT_LENGTH": _int("MAX_CONTENT_LENGTH", 1024 * 1024),
        "WTF_CSRF_SSL_STRICT": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": _bool("SESSION_COOKIE_SECURE", not development),
        "REMEMBER_COOKIE_HTTPONLY": True,
        "SQLALCHEMY_ENGINE_OPTIONS": {},
        "SWEEP_ON_START": _bool("SWEEP_ON_START", True),
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


def _normalise_db_url(url: str) -> str:
    """Accept postgres:// and postgresql:// and use psycopg 3 for both."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url
