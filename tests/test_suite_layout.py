"""The suite's own layout: a test file imports no other test file (what several share lives in
tests/helpers/ or tests/conftest.py), the slow and quick lanes' lists name test files that exist,
and the PostgreSQL pass leaves out only the tests that use no database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import QUICK_MODULES, SLOW_MODULES

TESTS = Path(__file__).resolve().parent


def test_no_test_file_imports_another_test_file():
    importing = [
        f"{path.relative_to(TESTS)}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from|import)\s+(tests\.(\w+\.)*test_\w+|\.+test_\w+)", line)
    ]
    assert importing == []


def test_every_slow_module_is_a_test_file_that_exists():
    files = {path.name for path in TESTS.rglob("test_*.py")}
    assert sorted(SLOW_MODULES - files) == []


def test_every_quick_module_is_a_test_file_that_exists_and_not_a_slow_one():
    files = {path.name for path in TESTS.rglob("test_*.py")}
    assert sorted(QUICK_MODULES - files) == []
    assert sorted(QUICK_MODULES & SLOW_MODULES) == []


def test_the_postgresql_pass_leaves_out_exactly_the_tests_that_use_no_database():
    # Unit tests (no database), a module that reads the suite's DATABASE_URL itself (its own
    # schema on PostgreSQL), and tests that use the `database_url` fixture.
    modules = ("tests/test_circles.py", "tests/test_migrations.py", "tests/test_round_trips.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *modules],
        cwd=TESTS.parent,
        env={**os.environ, "COUNTERSIGN_TEST_DATABASE_ONLY": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kept = [line for line in done.stdout.splitlines() if "::" in line]
    assert re.search(r"\d+/\d+ tests collected \([1-9]\d* deselected\)", done.stdout), done.stdout
    assert not any(t.startswith("tests/test_circles.py::") for t in kept)
    for module in modules[1:]:  # every test of theirs is kept
        names = re.findall(r"^def (test_\w+)", (TESTS.parent / module).read_text(), re.M)
        assert names and all(any(t.startswith(f"{module}::{name}") for t in kept) for name in names), module


def test_the_test_command_leaves_them_out_of_the_postgresql_pass_only():
    script = (TESTS.parent / "scripts" / "test").read_text()
    sqlite = next(line for line in script.splitlines() if line.startswith("suite sqlite "))
    postgresql = next(line for line in script.splitlines() if line.startswith("suite postgresql "))
    assert sqlite.endswith(' "" "$@" &') and postgresql.endswith(' 1 "$@" &')  # (the `only` argument)
    assert "COUNTERSIGN_TEST_DATABASE_ONLY=$only" in script


def test_every_polled_browser_wait_is_a_function():
    # Playwright's wait_for_function evaluates a plain expression (`"window.n >= 1"`) again on
    # every poll with eval(), which the app's Content-Security-Policy (script-src 'self') refuses
    # once the first check, made inside Playwright's own evaluate, came back false: the test then
    # fails only on a machine slow enough to need a second poll (CI, 2026-12-06). A function
    # (`"() => window.n >= 1"`) is evaluated once and called on each poll.
    waits = re.compile(r"wait_for_function\(\s*(f?)([\"'])(.*?)\2", re.S)
    plain = [
        f"{path.relative_to(TESTS)}: {m.group(3)}"
        for path in sorted(TESTS.rglob("*.py"))
        for m in waits.finditer(path.read_text())
        if not re.match(r"\s*(\([^)]*\)|\w+)\s*=>", m.group(3))
    ]
    assert plain == []
