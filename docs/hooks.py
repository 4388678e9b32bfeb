"""MkDocs hook: the pages that must never drift are written from the code on every `mkdocs build`.

- reference/settings.md from `app.config.SETTINGS` (the meanings below; a test fails when a setting
  has none, or when one here no longer exists);
- reference/cli.md from the `flask` commands' own `--help`;
- reference/http-api.md from the OpenAPI document the app serves at /api/openapi.json.

The pages exist only in the build (`File.generated`), never as files in docs/.
"""

from __future__ import annotations

import json
from typing import Any

import click

# What each setting means, by its config key. Its kind and default come from SETTINGS itself.
MEANINGS: dict[str, str] = {
    "COUNTERSIGN_ENV": (
        "`production` (the default), `development` or `testing`; the last two allow a throwaway `SECRET_KEY` "
        "and cookies without `Secure`"
    ),
    "SECRET_KEY": (
        "signs sessions, card tokens and countersignature tokens. Required in production; in development a "
        "random one is made per start"
    ),
    "SECRET_KEY_FALLBACKS": (
        "comma-separated old keys still accepted during a rotation (sessions and card tokens signed with them keep working)"
    ),
    "AUDIT_KEY": (
        "keys the audit chain (an HMAC per row and on each chain's head); never stored in the database. "
        "Default: derived from `SECRET_KEY`; without a `SECRET_KEY` (development) a fixed development key, so"
        " the demo's chain verifies across restarts. Production should set its own long random value"
    ),
    "AUDIT_KEY_FALLBACKS": (
        "comma-separated older audit keys whose rows must still verify; the word `default` stands for the "
        "keys derived from `SECRET_KEY` and `SECRET_KEY_FALLBACKS`"
    ),
    "SQLALCHEMY_DATABASE_URI": "the database; `postgresql://…` (or `postgres://…`) uses psycopg 3",
    "REDIS_URL": (
        "Redis: rate limits, sign-in slow-downs, connector waits and delivery dedupe, the job queue "
        "(Dramatiq) and each conversation's event stream. Unset: an in-process fakeredis, for one process "
        "only (logged at start)"
    ),
    "APPROVALS_TTL": "seconds a card (and its token) lives, both signatures included",
    "APPROVALS_MAX_PENDING_PER_RUN": "cards one run may hold pending; further calls are refused",
    "APPROVALS_MAX_PENDING_PER_PERSON": ("cards a person's own requests may have pending across all runs"),
    "APPROVALS_MAX_PENDING_FROM_AGENTS": (
        "cards her agents (agent tokens, MCP) may have pending for her, all together, counted apart from hers: "
        "an agent starting run after run cannot flood her or use up her own cap"
    ),
    "OFFLINE_WORD_PAUSE_MS": "ms between the offline model's words as it streams them (`0`: at once)",
    "APPROVALS_INTERRUPTED_AFTER": (
        "seconds after which a claimed approval still running belongs to a dead process and ends `interrupted` (never re-run)"
    ),
    "COUNTERSIGN_MODEL": "`offline`, `openai:<model>` or `anthropic:<model>`",
    "COUNTERSIGN_MODEL_BASE_URL": "an OpenAI-compatible server's base URL (Ollama, vLLM, llama.cpp, LM Studio…)",
    "COUNTERSIGN_MODEL_API_KEY": (
        "the provider's key; read from `MODEL_API_KEY` (or `COUNTERSIGN_MODEL_API_KEY`), else the provider's "
        "own `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`"
    ),
    "COUNTERSIGN_MODEL_TIMEOUT": "seconds to wait for the model",
    "COUNTERSIGN_MAX_STEPS": "model requests per turn",
    "COUNTERSIGN_TOOLSETS": "the toolsets the web agent (and a token with no toolsets of its own) may use",
    "FILES_ROOT": "`manage_files`' per-tenant folders",
    "SMTP_URL": (
        "`smtp://user:pass@host:port`; without it `send_email` leaves its mail queued and no email connector "
        "or countersignature mail is sent"
    ),
    "TELEGRAM_BOT_TOKEN": "the Telegram bot's token",
    "TELEGRAM_WEBHOOK_SECRET": "the `secret_token` Telegram sends with each webhook",
    "TELEGRAM_API_BASE": "Telegram's Bot API base URL (the tests point it at a local fake)",
    "TELEGRAM_BOT_USERNAME": "the bot's username, for the Linked channels page's `t.me/<bot>?start=<code>` link",
    "SLACK_BOT_TOKEN": "the Slack bot's token",
    "SLACK_SIGNING_SECRET": "verifies Slack's v0 signatures (five-minute window)",
    "SLACK_API_BASE": "Slack's Web API base URL (the tests point it at a local fake)",
    "EMAIL_WEBHOOK_SECRET": (
        "verifies the mail provider's inbound webhook (`X-Countersign-Signature` over timestamp and body);"
        " needs `SMTP_URL` (the app does not start with one and not the other: it could answer nobody)"
    ),
    "CARDS_UNSEEN_AFTER": "seconds a card waits, no page of its person open, before `flask connectors push-unseen` sends it",
    "LINK_CODE_TTL": "seconds a code (or a mailed link) that links a person's chat account or address is good for",
    "EMAIL_REQUIRE_AUTH": (
        "an inbound email without a passing provider verdict (SPF/DKIM/DMARC) is from nobody: refused, "
        "unanswered. Turn off only for a provider that sends none, knowing a forged `From:` is then believed"
    ),
    "CONNECTOR_CONFIRM_TTL": 'seconds a chat thread waits for "yes" (never longer than the card\'s own life)',
    "CONNECTORS_CONFIRM_BY_REPLY": 'connectors that may take "yes" for an answer; the others post a link to the card',
    "PUBLIC_URL": "the app's address, for card links in chat threads, emails and MCP elicitations",
    "MCP_STATE_KEYS": (
        "comma-separated keys sealing MCP request state (the first seals, all unseal; at least 32 bytes). "
        "Default: derived from `SECRET_KEY`, so every process and restart agrees"
    ),
    "MCP_ALLOWED_HOSTS": "`Host` values MCP accepts (DNS-rebinding protection)",
    "MCP_ALLOWED_ORIGINS": "`Origin` values MCP accepts",
    "MAIL_FROM": (
        "the sender of card emails, countersignature requests and replies; its domain names the card emails' Message-IDs"
    ),
    "RATELIMIT_ENABLED": "Flask-Limiter on sign-in, messages, answers and MCP tool calls",
    "RATELIMIT_STORAGE_URI": "where rate limits are counted: Redis at `REDIS_URL` when set, else this process's memory",
    "RATELIMIT_HEADERS_ENABLED": "rate-limit headers on every limited answer",
    "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": (
        "with Redis down, limits are counted in each process's memory rather than failing the request"
    ),
    "TRUSTED_PROXIES": (
        "proxies in front of the app whose `X-Forwarded-For` is believed (1 behind one load balancer); 0 "
        "believes no one, so a client cannot choose the address its limits count against"
    ),
    "RATELIMIT_MESSAGES_PER_PERSON": "messages and retries per person, browser and API counted together",
    "RATELIMIT_MESSAGES_PER_ADDRESS": "messages and retries per client address",
    "RATELIMIT_ANSWERS_PER_PERSON": "card and form answers per person",
    "RATELIMIT_ANSWERS_PER_ADDRESS": "card and form answers per client address",
    "RATELIMIT_MCP_CALLS_PER_TOKEN": "MCP tool calls per token (a waiting call's retries are not counted)",
    "RATELIMIT_SIGNIN_FAILURES_PER_ADDRESS": "failed sign-ins block their source address",
    "SIGNIN_SLOWDOWN_AFTER": (
        "per account, after this many failures each further one doubles the wait (1 s, 2 s, 4 s …); an "
        "address the account signed in from in the last 30 days, and a browser holding the account's device "
        "cookie (for 10 tries), are exempt"
    ),
    "SIGNIN_SLOWDOWN_CAP": "the longest wait, in seconds, between sign-in tries on one account",
    "MESSAGE_MAX_CHARS": "longer messages are refused whole (413), never cut",
    "WTF_CSRF_TIME_LIMIT": "CSRF tokens live as long as the session",
    "MAX_CONTENT_LENGTH": "bytes; larger requests get 413",
    "WTF_CSRF_SSL_STRICT": "over HTTPS, a POST's Referer must be this site",
    "SESSION_COOKIE_HTTPONLY": "scripts cannot read the session cookie",
    "SESSION_COOKIE_SAMESITE": "the session cookie is not sent on cross-site POSTs",
    "SESSION_COOKIE_SECURE": "the session cookie is sent over HTTPS only; on by default in production, off in development",
    "REMEMBER_COOKIE_HTTPONLY": "scripts cannot read Flask-Login's cookie",
    "SESSION_MAX_AGE": "seconds a browser session lives server-side, even without a sign-out",
    "SQLALCHEMY_ENGINE_OPTIONS": (
        "SQLite waits 30 s for a writer; PostgreSQL's pool tests each connection on checkout with its"
        " transaction's BEGIN (app/pg_checkout.py: no ping of its own)"
    ),
    "SWEEP_ON_START": "end dead claims and dead workers' turns as `interrupted` when the app starts",
    "LOG_LEVEL": (
        "the app's own log lines from this level (`DEBUG`, `INFO`, `WARNING`, `ERROR`), the libraries' from"
        " `WARNING`; each line with its time, process id, level and logger, on standard error, unless the"
        " server configured logging itself"
    ),
    "TURNS_RUNNER": (
        "where turns run: `dramatiq` (the `flask --app wsgi worker` processes; the default with `REDIS_URL`),"
        " `pool` (a bounded pool in the web process; the default without), `inline` (in the caller: the test "
        "kit)"
    ),
    "TURNS_CONCURRENCY": "turns the in-process pool runs at once",
    "WORKER_THREADS": (
        "turns one worker process runs at once, each a task on the process's one event loop while its model thinks"
        " (`flask --app wsgi worker --threads N` says the same)"
    ),
    "WORKER_TASK_THREADS": "connector deliveries one worker process runs at once, each in a thread of its own",
    "TURN_TIMEOUT": (
        "seconds one pass of a turn may take: then the worker cancels it (the sweep ends its run `interrupted`), and"
        " how long a stopping worker lets its running passes end"
    ),
    "TURN_HEARTBEAT": 'seconds between a running turn\'s "still alive"',
    "TURN_DEAD_AFTER": "a turn silent this many seconds is `interrupted` (its worker died), with Retry",
    "TURN_WAIT": (
        "seconds an API POST that starts a turn waits for it by default (`Prefer: wait=N` asks less, `Prefer:"
        " respond-async` none)"
    ),
    "EVENTS_MAXLEN": "a conversation's event stream keeps about this many events",
    "EVENTS_TTL": "seconds after its last event a conversation's stream is gone",
    "EVENTS_HEARTBEAT": "an open stream sends a keep-alive comment after this many seconds of silence",
    "EVENTS_STREAM_SECONDS": "an open stream ends after this many seconds (the client reconnects with `Last-Event-ID`)",
    "EVENTS_TEXT_EVERY_MS": (
        "a streamed reply's words go out at most this often (ms): its first words at once, words that come "
        "sooner wait for the next event"
    ),
    "EVENTS_TEXT_PER_SECOND": (
        "a process streaming many replies shares this many text events a second among them: with n replies "
        "streaming, each one's words go out every n ÷ this seconds, in larger parts (`0` turns the sharing "
        "off)"
    ),
    "EVENTS_MAX_STREAMS_PER_PERSON": "open event streams one person may hold (each holds a web thread); more get 429",
    "EVENTS_RECHECK": "seconds between an open stream's checks that its session or token is still live",
    "ADMIN_POLL": "seconds between the admin console's looks for changes (its counts, the countersignature queue, the table)",
    "BENCH_PROBE": "mounts `/api/_probe/insert`, the benchmarks' one-INSERT baseline (never in production)",
}

# Defaults worked out in code (`derived`), said in words.
DERIVED_DEFAULTS = {
    "COUNTERSIGN_ENV": "`production`",
    "SECRET_KEY": "required in production",
    "AUDIT_KEY": "derived from `SECRET_KEY`",
    "AUDIT_KEY_FALLBACKS": "keys derived from `SECRET_KEY_FALLBACKS`",
    "COUNTERSIGN_MODEL_API_KEY": "the provider's own key variable",
    "MCP_STATE_KEYS": "derived from `SECRET_KEY`",
    "SESSION_COOKIE_SECURE": "on in production",
}


def _default(setting: Any) -> str:
    from app.config import ROOT

    if setting.kind == "derived":
        return DERIVED_DEFAULTS[setting.key]
    if setting.default is None or setting.default == "":
        return "unset"
    text = str(setting.default).replace(f"{ROOT}/", "")
    if setting.kind == "bool" or isinstance(setting.default, bool):
        text = "on" if setting.default else "off"
    return f"`{text}`"


def settings_page() -> str:
    """The settings page: every row of SETTINGS, the ones read from the environment first."""
    from app.config import SETTINGS

    lines = [
        "# Settings",
        "",
        "Every setting Countersign reads is a row of `SETTINGS` in `app/config.py`; this page is written",
        "from that table each time the docs are built. A variable may also carry a `FLASK_` or",
        "`COUNTERSIGN_` prefix (`FLASK_SECRET_KEY`), and an empty value counts as unset. Booleans are",
        "on for `1`, `true`, `yes` or `on`. Lists are comma-separated.",
        "",
        "## Read from the environment",
        "",
        "| variable | kind | default | meaning |",
        "|---|---|---|---|",
    ]
    fixed = []
    for setting in SETTINGS:
        if setting.kind == "fixed":
            fixed.append(setting)
            continue
        name = f"`{setting.variable or setting.key}`"
        if setting.variable and setting.variable != setting.key:
            name += f" (config key `{setting.key}`)"
        lines.append(f"| {name} | {setting.kind} | {_default(setting)} | {MEANINGS.get(setting.key, '')} |")
    lines += [
        "",
        "## Fixed",
        "",
        "Set by the app itself and not read from the environment: the choices every deployment keeps.",
        "",
        "| config key | value | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{s.key}` | `{s.default!r}` | {MEANINGS.get(s.key, '')} |" for s in fixed]
    return "\n".join(lines) + "\n"


def cli_app() -> Any:
    """A bare Flask app holding the app's `flask` commands as `create_app()` registers them (no
    database, no Redis: enough for their help)."""
    from flask import Flask

    from app.cli import register
    from app.extensions import migrate_commands

    bare = Flask("countersign-docs")
    register(bare)
    bare.cli.add_command(migrate_commands)
    return bare


def cli_group() -> click.Group:
    """The app's `flask` commands."""
    group: click.Group = cli_app().cli
    return group


def _helps(command: click.Command, path: list[str]) -> list[tuple[str, str]]:
    """(the command line, its --help) for a command and, for a group, each of its subcommands."""
    name = " ".join(["flask --app wsgi", *path])
    context = click.Context(command, info_name=name, terminal_width=100, max_content_width=100)
    found = [(name, command.get_help(context))]
    if isinstance(command, click.Group) and path[0] != "db":  # `db`'s are Flask-Migrate's own
        for sub in sorted(command.commands):
            found += _helps(command.commands[sub], [*path, sub])
    return found


def cli_page() -> str:
    """The command-line page: each command's own --help."""
    group = cli_group()
    lines = [
        "# Command line",
        "",
        "Every command runs as `flask --app wsgi <command>` (`.venv/bin/flask` after `./scripts/setup`)",
        "and reads the [settings](settings.md) from the environment. This page is each command's own",
        "`--help`, written when the docs are built. `flask --app wsgi run` is Flask's own development",
        "server; `db` is Flask-Migrate's group, of which production needs `flask --app wsgi db upgrade`.",
        "",
    ]
    for name in sorted(group.commands):
        for line, help_text in _helps(group.commands[name], [name]):
            lines += [f"## `{line}`", "", "```text", help_text.rstrip(), "```", ""]
    return "\n".join(lines)


API_INTRO = """# HTTP API

The JSON API lives under `/api`. This page is written from the OpenAPI document the app serves at
`/api/openapi.json` each time the docs are built, so it says what the code does.

- **Authentication**: `Authorization: Bearer <token>` with a personal access token
  (`flask --app wsgi users create-token EMAIL`), or the browser's session cookie plus the
  `X-CSRFToken` header on every POST, PATCH and DELETE. An `agent` token (the default scope) chats
  and calls actions but never answers a card or a form (403); a `client` token may. A token's
  toolsets bound what it reaches on every route.
- **Turns are jobs.** A POST that starts or resumes a turn (a message, a retry, an answer) honours
  RFC 7240 `Prefer`: by default it waits for the turn up to `TURN_WAIT` seconds and answers 200
  with the messages and pending prompts, or 202 with `{"run", "events"}` if the turn is still
  going; `Prefer: respond-async` answers at once (202 for a message; for an answer, 200 with the
  card's final `status` and its `result`, the model's continuation following on the events).
- **Events**: `GET /api/conversations/{id}/events` is a Server-Sent Events stream, each event with
  an `id`; reconnecting with `Last-Event-ID` resumes with no gap and no repeat.
- **Errors** are `{"error", "message"}` with the status each operation lists: 400 bad token or values, 403
  another person, session or an agent credential, 404 not found (another tenant looks the same),
  409 already decided, 410 expired, 413 too long, 429 rate limited, 503 nothing was changed.

With the demo running and a token from `flask --app wsgi users create-token alice@example.com`:

```sh
curl -s -X POST -H "Authorization: Bearer $TOKEN" http://127.0.0.1:5000/api/conversations
curl -s -X POST -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" -d '{"text": "/delete_post post=1"}' http://127.0.0.1:5000/api/conversations/1/messages
curl -s -N -H "Authorization: Bearer $TOKEN" http://127.0.0.1:5000/api/conversations/1/events
```

The second answers with the card as a pending `Prompt`; an `agent` token sees it with
`"token": null` and cannot confirm it, a `--scope client` token gets the token to
`POST /api/approvals/{id}/confirm`.

"""


def _schema_text(schema: Any) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False)


def api_page() -> str:
    """The HTTP API page: every operation of the OpenAPI document, then its schemas."""
    from app.api.openapi import document

    doc = document()
    lines = [API_INTRO.rstrip(), "", "## Operations", ""]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            lines += [f"### `{method.upper()} {path}`", "", op.get("summary", "") + ".", ""]
            if op.get("description"):
                lines += [op["description"], ""]
            params = op.get("parameters", [])
            if params:
                lines += ["Parameters: " + ", ".join(f"`{p['name']}` ({p['in']})" for p in params) + ".", ""]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                lines += ["Request body:", "", "```json", _schema_text(body), "```", ""]
            lines += ["| status | meaning |", "|---|---|"]
            for status, response in op.get("responses", {}).items():
                lines.append(f"| {status} | {response.get('description', '').replace('|', '/')} |")
            lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        lines += [f"### {name}", "", "```json", _schema_text(schema), "```", ""]
    return "\n".join(lines)


GENERATED = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/http-api.md": api_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the build."""
    from mkdocs.structure.files import File

    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    return files
