"""The suite's own layout: a test file imports no other test file (what several share lives in
tests/helpers/ or tests/conftest.py), and the slow and quick lanes' lists name test files that exist."""

from __future__ import annotations

import re
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
