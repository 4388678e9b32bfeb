"""Commands work as printed (issue 24): every `flask` command the README, the demo's output and the
admin pages print runs in a fresh shell (PATH and HOME only) in a checkout where ./scripts/demo
ran; the demo's .flaskenv gives development settings to the demo only, never to a deployment."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app import config

ROOT = Path(__file__).resolve().parent.parent
FLASK = re.compile(r"(?:\.venv/bin/)?flask\b")
# Commands that serve until stopped (`worker` also needs REDIS_URL): their --help is what a test can run.
SERVES = {"run", "mcp", "worker"}
# A synopsis, not a command: a <placeholder>, [an option], a|choice, an ellipsis, or a word in capitals
# other than the ones filled in below.
SYNOPSIS = re.compile(r"[<\[|…]|\.\.\.|\b(?!ID\b)[A-Z]{2,}\b")
FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_commands() -> list[str]:
    """The flask commands of the README and the docs: each line of a code block, each inline code span."""
    found: list[str] = []
    for token in (t for page in DOCS for t in MarkdownIt().parse(page.read_text())):
        if token.type in ("fence", "code_block"):
            found += [line.split("  #")[0].strip() for line in token.content.splitlines()]
        # In prose, a bare `flask` or `flask db` names a command; it prints none.
        spans = [" ".join(child.content.split()) for child in token.children or [] if child.type == "code_inline"]
        found += [span for span in spans if len(span.split()) > 2]
    return list(dict.fromkeys(c for c in found if FLASK.match(c)))


def printed_commands(text: str) -> list[str]:
    """The flask commands in printed text (the demo's output, a page): each up to two spaces or the line's end."""
    return list(dict.fromkeys(m.group(0).strip() for m in re.finditer(r"(?:\.venv/bin/)?flask [^\n<]*?(?=  |\n|$)", text)))


def fresh_shell(command: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": FRESH_PATH, "HOME": str(cwd.parent / "home"), **extra}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def demo_checkout(tmp_path_factory) -> tuple[Path, str]:
    """A copy of this checkout (the project's .venv linked in) after the demo's setup steps: its
    .flaskenv, `db upgrade` and `demo` on its own SQLite, as `./scripts/demo --no-serve` runs them.
    Returns the copy and what the demo printed."""
    work = tmp_path_factory.mktemp("demo")
    checkout, home = work / "countersign", work / "home"
    home.mkdir()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    # The install would re-point the linked .venv's editable install at this copy: it must not run here.
    (checkout / "scripts" / "setup").write_text("#!/bin/sh\necho 'scripts/setup must not run in this test' >&2\nexit 1\n")
    done = fresh_shell("./scripts/demo --no-serve", checkout, DEMO_SKIP_SETUP="1")
    assert done.returncode == 0, done.stdout + done.stderr
    # The checkpoint a reader keeps (production.md: `audit checkpoint` from cron), for `verify --against`.
    kept = fresh_shell(".venv/bin/flask --app wsgi audit checkpoint > checkpoint.txt", checkout)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    return checkout, done.stdout


def filled(command: str, checkout: Path) -> str | None:
    """The command to run for a printed one: None for a synopsis; a server's --help; ID as a live token's id."""
    if "ID" in command.split():
        with sqlite3.connect(checkout / "instance" / "countersign.sqlite3") as database:
            (live,) = database.execute("select min(id) from api_tokens where revoked = 0").fetchone()
        command = re.sub(r"\bID\b", str(live), command)
    if SYNOPSIS.search(command):
        return None
    words = command.split()
    subcommand = next((w for w in words[1:] if not w.startswith("-") and w != "wsgi"), "")
    return f"{command} --help" if subcommand in SERVES else command


def run_each(commands: list[str], checkout: Path, prefix: str = "") -> list[str]:
    """Run each command in its own fresh shell; the failures, each with what it said."""
    failures = []
    for printed in commands:
        command = filled(printed, checkout)
        if command is None:
            continue
        done = fresh_shell(prefix + command, checkout)
        if done.returncode != 0:
            failures.append(f"{printed!r} -> exit {done.returncode}: {(done.stderr or done.stdout)[-600:]}")
    return failures


def test_each_command_the_demo_prints_runs_in_a_fresh_shell(demo_checkout):
    checkout, said = demo_checkout
    commands = printed_commands(said)
    assert any("users create-token alice@example.com" in c for c in commands), said
    assert run_each(commands, checkout) == []


def test_each_flask_command_in_the_readme_and_docs_runs_in_a_fresh_shell_as_it_says(demo_checkout):
    """The README and getting started say: activate the project's virtualenv first (or write .venv/bin/flask)."""
    checkout, _ = demo_checkout
    commands = readme_commands()
    assert any("users create-token alice@example.com" in c for c in commands)
    assert all(". .venv/bin/activate" in (ROOT / page).read_text() for page in ("README.md", "docs/getting-started.md"))
    assert run_each(commands, checkout, prefix=". .venv/bin/activate && ") == []


def test_each_flask_command_on_the_admin_pages_runs_in_a_fresh_shell(demo_checkout, sign_in):
    checkout, _ = demo_checkout
    admin = sign_in("admin@example.com")
    pages = "\n".join(admin.client.get(path).get_data(as_text=True) for path in ("/admin/", "/admin/audit", "/admin/tokens"))
    codes = [" ".join(code.split()) for code in re.findall(r"<code>(.*?)</code>", pages, re.S)]
    assert run_each([c for c in codes if FLASK.match(c)], checkout) == []


def test_the_demos_flaskenv_is_git_ignored():
    assert subprocess.run(["git", "check-ignore", "-q", ".flaskenv"], cwd=ROOT).returncode == 0


def test_the_demo_says_how_to_choose_its_port():
    readme = (ROOT / "README.md").read_text()
    assert "PORT=8080 ./scripts/demo" in readme and "HOST" in readme
    assert '--port "${PORT:-5000}"' in (ROOT / "scripts" / "demo").read_text()


@pytest.fixture
def bare_environment(monkeypatch):
    """No setting of this test run's own in the environment (the demo's fresh shell)."""
    for name in list(os.environ):
        if re.match(r"(FLASK_|COUNTERSIGN_)?(COUNTERSIGN_ENV|SECRET_KEY|DATABASE_URL|REDIS_URL|COUNTERSIGN_DEMO)$", name):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COUNTERSIGN_DEMO", "1")
    return monkeypatch


def test_the_demos_flaskenv_gives_development_settings_to_the_demo_only(bare_environment):
    """COUNTERSIGN_DEMO=1 (the demo's .flaskenv) alone: development. Beside anything a deployment
    sets (SECRET_KEY, DATABASE_URL, REDIS_URL): production's settings, or no start without SECRET_KEY."""
    assert config.load()["COUNTERSIGN_ENV"] == "development"
    bare_environment.setenv("DATABASE_URL", "postgresql://db.internal/countersign")
    with pytest.raises(RuntimeError, match="SECRET_KEY is not set"):
        config.load()
    bare_environment.delenv("DATABASE_URL")
    bare_environment.setenv("REDIS_URL", "redis://cache:6379/0")
    with pytest.raises(RuntimeError, match="SECRET_KEY is not set"):
        config.load()
    bare_environment.setenv("SECRET_KEY", "s3cret")
    assert config.load()["COUNTERSIGN_ENV"] == "production"
