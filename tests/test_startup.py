"""Starting the app: settings, action discovery and its errors, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from app import create_app
from app.copilot.actions import Kind, discover
from app.errors import ActionDeclarationError
from app.extensions import db
from app.models import ApiToken, User
from tests.conftest import CSRF, base_config

ROOT = Path(__file__).resolve().parents[1]
# A fresh interpreter: the app made, then (FIRST_TURN) the demo seeded and one message sent;
# it prints which of the libraries start-up defers were loaded after each, whether the garbage
# collector runs after the import and after create_app(), and the reply.
FRESH = """
import gc, json, sys
from app import create_app
collecting = {"after_import": gc.isenabled()}
DEFERRED = ("pydantic_ai", "openai", "anthropic", "httpx", "alembic", "flask_migrate", "fakeredis",
            "sqlalchemy.dialects.postgresql")
def loaded():
    return [name for name in DEFERRED if name in sys.modules]
app = create_app({
    "COUNTERSIGN_ENV": "testing", "SECRET_KEY": "fresh", "SWEEP_ON_START": False,
    "SQLALCHEMY_DATABASE_URI": "sqlite:///:memory:", "REDIS_URL": None, "TURNS_RUNNER": "inline",
})
collecting["after_create_app"] = gc.isenabled()
out = {"after_create_app": loaded(), "collecting": collecting}
if FIRST_TURN:
    from app.cli import seed_demo
    from app import copilot
    from app.extensions import db
    from app.models import Conversation, Message
    with app.app_context():
        db.create_all()
        alice = seed_demo()["alice@example.com"]
        conversation = Conversation(tenant_id=alice.tenant_id, user_id=alice.id)
        db.session.add(conversation)
        db.session.commit()
        copilot.send_message(conversation, copilot.person(alice, "web"), "/list_posts")
        out["reply"] = db.session.scalar(db.select(Message.text).where(Message.role == "assistant"))
    out["after_first_turn"] = loaded()
print(json.dumps(out))
"""


def fresh_process(first_turn: bool) -> dict[str, object]:
    """Run FRESH in a new interpreter (no REDIS_URL or DATABASE_URL of ours leaks into it)."""
    code = f"FIRST_TURN = {first_turn}\n{FRESH}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COUNTERSIGN_ENV": "testing"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_secret_key_is_required_outside_development(monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("FLASK_SECRET_KEY", raising=False)
    monkeypatch.delenv("COUNTERSIGN_ENV", raising=False)
    with pytest.raises(RuntimeError, match="SECRET_KEY is not set"):
        create_app({"COUNTERSIGN_ENV": "production"})


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("APPROVALS_TTL", "120")
    monkeypatch.setenv("DATABASE_URL", "postgres://u@h/db")
    from app import config

    loaded = config.load({"COUNTERSIGN_ENV": "testing"})
    assert loaded["APPROVALS_TTL"] == 120
    assert loaded["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://u@h/db"


def test_the_config_has_one_key_per_settings_row_in_its_order():
    from app import config

    loaded = config.load({"COUNTERSIGN_ENV": "testing"})
    assert list(loaded) == [setting.key for setting in config.SETTINGS]


def test_the_first_bad_number_in_the_environment_stops_the_start(monkeypatch):
    monkeypatch.setenv("EVENTS_RECHECK", "soon")
    monkeypatch.setenv("APPROVALS_TTL", "half an hour")
    from app import config

    with pytest.raises(ValueError, match="'half an hour'"):
        config.load({"COUNTERSIGN_ENV": "testing"})


@pytest.mark.slow  # a fresh interpreter of its own
def test_the_app_starts_without_importing_the_agent_loop_or_model_sdks():
    """pydantic-ai and the providers' SDKs are most of start-up: a process imports them on its
    first turn, never in create_app(); nor the embedded Redis or PostgreSQL's dialect (a SQLite
    app without REDIS_URL)."""
    assert fresh_process(first_turn=False)["after_create_app"] == []


@pytest.mark.slow  # a fresh interpreter of its own
def test_the_garbage_collector_runs_again_once_the_app_is_made():
    """Start-up holds the collector off (app/startup.py); it must never stay off."""
    assert fresh_process(first_turn=False)["collecting"] == {"after_import": True, "after_create_app": True}


def test_the_embedded_redis_is_made_once_on_first_use(database_url):
    from app.extensions import redis_client

    app = create_app(base_config(database_url, REDIS_URL=None))
    with app.app_context():
        assert app.extensions["redis"] is None
        first = redis_client.client
        first.set("k", "v")
        assert redis_client.client is first and redis_client.client.get("k") == b"v"


def test_each_actions_schema_is_made_once_per_process_not_once_per_app(monkeypatch):
    """Discovery's checks read each action's JSON Schema several times (its secrets, its form, its
    editable fields), for every app a process makes; pydantic makes it afresh on every call, so it
    is kept per Input class."""
    from pydantic import BaseModel

    discover("app.actions")  # every demo action's schema made (if this process had not yet)
    made: list[str] = []
    real = BaseModel.model_json_schema.__func__  # type: ignore[attr-defined]

    def counted(cls: type[BaseModel], *args: object, **kwargs: object) -> dict[str, object]:
        made.append(cls.__qualname__)
        return real(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(BaseModel, "model_json_schema", classmethod(counted))
    registry = discover("app.actions")
    # (the checks that read a schema ran: a form's, and an edit's)
    assert registry.actions["draft_post"].ask_for_missing and registry.actions["send_email"].editable
    assert made == []


@pytest.mark.slow  # a fresh interpreter of its own
def test_a_fresh_processs_first_turn_imports_the_agent_loop_and_answers():
    out = fresh_process(first_turn=True)
    assert out["after_create_app"] == []
    assert "pydantic_ai" in out["after_first_turn"] and "alembic" not in out["after_first_turn"]
    assert "Spring meetup (draft)" in out["reply"]


PRELOADED = """
from app import copilot, create_app
app = create_app({"SQLALCHEMY_DATABASE_URI": "sqlite://", "SECRET_KEY": "x", "SWEEP_ON_START": False})
copilot.preload(app)
from pydantic_ai.messages import ModelMessagesTypeAdapter as history
print(type(history.validator).__name__, type(history.serializer).__name__)
"""


def test_a_process_that_runs_passes_builds_the_historys_validator_and_serializer_as_it_starts():
    """pydantic builds them on first use (80 ms): not on the first pass, which would hold up every
    pass on the loop (turns._serve.preload)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COUNTERSIGN_ENV": "testing"}
    done = subprocess.run([sys.executable, "-c", PRELOADED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split() == ["SchemaValidator", "SchemaSerializer"]  # (MockValSer until built)


def test_demo_actions_are_discovered_with_their_kinds():
    registry = discover("app.actions")
    kinds = {name: a.kind for name, a in registry.actions.items()}
    assert kinds == {
        "list_posts": Kind.READ,
        "publish_post": Kind.WRITE,
        "draft_post": Kind.WRITE,
        "manage_files": Kind.WRITE,
        "delete_post": Kind.DESTRUCTIVE,
        "send_email": Kind.EXTERNAL,
    }
    assert registry.actions["delete_post"].toolsets == ("blog",)


def test_destructive_action_without_toolset_fails_naming_file_and_fix():
    with pytest.raises(ActionDeclarationError) as error:
        discover("tests.fixtures.broken_no_toolset")
    message = str(error.value)
    assert "wipe_disk.py:" in message
    assert "must be exposed through a named toolset" in message
    assert '@expose("<toolset>")' in message


def test_input_that_is_not_a_pydantic_model_fails_at_start():
    with pytest.raises(ActionDeclarationError, match=r"greet\.py.*Input is not a pydantic model.*Fix:"):
        discover("tests.fixtures.broken_input")


def test_app_does_not_start_with_a_misdeclared_action(database_url):
    with pytest.raises(ActionDeclarationError):
        create_app(
            {
                "COUNTERSIGN_ENV": "testing",
                "SQLALCHEMY_DATABASE_URI": database_url,
                "ACTIONS_PACKAGE": "tests.fixtures.broken_no_toolset",
                "SWEEP_ON_START": False,
            }
        )


def test_actions_command_lists_name_kind_toolsets_and_schema(app):
    out = app.test_cli_runner().invoke(args=["actions"]).output
    assert "delete_post" in out and "destructive" in out and "blog" in out and "(post*)" in out


def test_create_token_prints_a_token_that_is_stored_hashed(app):
    result = app.test_cli_runner().invoke(args=["users", "create-token", "alice@example.com"])
    token = result.stdout.strip()  # the token alone on stdout; its scope goes to stderr
    assert token.startswith("cs_")
    with app.app_context():
        stored = db.session.scalars(sa.select(ApiToken.token_hash)).all()
        assert token not in stored and len(stored) == 1
    response = app.test_client().post("/api/conversations", json={}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201


def test_demo_command_refuses_production(app):
    app.config["COUNTERSIGN_ENV"] = "production"
    result = app.test_cli_runner().invoke(args=["demo"])
    assert result.exit_code != 0 and "development" in result.output


def test_demo_seeds_tenants_people_and_posts(app):
    with app.app_context():
        emails = set(db.session.scalars(sa.select(User.email)))
    assert emails == {"alice@example.com", "bob@example.com", "admin@example.com", "carol@example.com"}


def test_pages_send_a_strict_content_security_policy(alice):
    csp = alice.client.get("/").headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp


def test_sign_out_invalidates_the_cards_token(app, sign_in, posts, handle_calls):
    alice = sign_in("alice@example.com")
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    alice.client.post("/logout", headers={"X-CSRFToken": alice.csrf})
    again = sign_in("alice@example.com")
    response = again.answer(approval, token)
    assert response.status_code == 403
    assert handle_calls["n"] == 0


def test_migrations_match_the_models(app):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with app.app_context(), db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == []


def test_a_cross_site_post_is_refused_before_anything_runs(alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        response = alice.client.post(
            f"/approvals/{approval}/confirm", data={"token": token}, headers={"X-CSRFToken": alice.csrf, **headers}
        )
        assert response.status_code == 403
    assert handle_calls["n"] == 0
    same_site = alice.client.post(
        f"/approvals/{approval}/confirm",
        data={"token": token},
        headers={"X-CSRFToken": alice.csrf, "Origin": "http://localhost", "Sec-Fetch-Site": "same-origin", "HX-Request": "true"},
    )
    assert same_site.status_code == 200 and handle_calls["n"] == 1


def test_session_cookie_is_httponly_lax_and_secure_outside_development(database_url):
    app = create_app(
        {"COUNTERSIGN_ENV": "production", "SECRET_KEY": "k", "SWEEP_ON_START": False, "SQLALCHEMY_DATABASE_URI": database_url}
    )
    page = app.test_client().get("/login", base_url="https://countersign.example")
    cookie = page.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie


def test_a_card_token_signed_with_the_previous_key_works_during_rotation(app, alice, posts, handle_calls):
    old_key = app.config["SECRET_KEY"]
    first = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    second = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Launch notes']}"))
    app.config.update(SECRET_KEY="the-new-key", SECRET_KEY_FALLBACKS=[old_key])
    # The session survives (Flask reads it with the fallback); the page's CSRF token is re-read, as a
    # reload would; the card's token, signed with the old key, still verifies.
    alice.csrf = CSRF.search(alice.client.get("/").get_data(as_text=True)).group(1)
    assert alice.answer(*first).status_code == 200 and handle_calls["n"] == 1
    app.config.update(SECRET_KEY_FALLBACKS=[])  # the old key is retired
    refused = alice.answer(*second)
    assert refused.status_code in (302, 400, 401) and handle_calls["n"] == 1


def test_every_sqlite_connection_waits_for_the_disk_at_each_commit_whatever_the_builds_default(tmp_path):
    # docs/production.md, "What a power cut may take": nothing committed. Some SQLite builds make
    # WAL mode's default `synchronous = NORMAL` (a power cut may take the last commits): the app
    # sets FULL on every connection it opens.
    import sqlite3

    from app import _on_connect

    raw = sqlite3.connect(tmp_path / "built-normal.sqlite3")
    raw.execute("PRAGMA synchronous = NORMAL")  # as such a build starts it
    _on_connect(raw, None)  # (as the pool's connect event calls it; the record is not read)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    raw.close()


def test_an_email_connector_that_could_answer_nobody_stops_the_start():
    # Mail in, no SMTP_URL to answer by: every reply and card failed, and with Redis away the
    # webhook itself answered 500. Said at the start instead, with what to do.
    from app import config

    with pytest.raises(RuntimeError, match="EMAIL_WEBHOOK_SECRET is set but SMTP_URL is not"):
        config.load({"COUNTERSIGN_ENV": "testing", "EMAIL_WEBHOOK_SECRET": "s"})
    assert config.load({"COUNTERSIGN_ENV": "testing", "EMAIL_WEBHOOK_SECRET": "s", "SMTP_URL": "smtp://mail"})["SMTP_URL"]
