"""./scripts/test runs ./scripts/lint first: a lint, format or type error fails it (and so CI)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The copy keeps mypy's cache (./scripts/test has just filled it, running the lint on this tree):
# mypy then checks again only the files that differ from what it cached, as it does between a
# developer's edits, so a run costs seconds, not the minute or more of a cold check of every module.
SKIP = shutil.ignore_patterns(".venv", "node_modules", "__pycache__", ".ruff_cache", ".pytest_cache", "instance")

BREAKS = {
    "lint": ("app/copilot/approvals/_cards.py", "import os\n", "unused import"),  # ruff check: F401
    "format": ("app/copilot/approvals/_cards.py", "x = {  'a':1 }\n", "would be reformatted"),  # ruff format --check
    "types": ("app/copilot/approvals/_cards.py", 'def wrong() -> int:\n    return "text"\n', "Incompatible return value"),  # mypy
}


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tree / "scripts" / "lint")],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "COUNTERSIGN_PYTHON": sys.executable},
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("lint") / "tree"
    shutil.copytree(ROOT, copy, ignore=SKIP)
    return copy


def test_the_tree_as_committed_passes_and_the_test_script_runs_the_lint_first(tree):
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    script = (ROOT / "scripts" / "test").read_text()
    assert script.index("./scripts/lint") < script.index("-m pytest")


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_a_lint_format_or_type_error_fails_it(tree, kind):
    path, added, said = BREAKS[kind]
    target = tree / path
    original = target.read_text()
    target.write_text(original + "\n\n" + added)
    try:
        done = lint(tree)
    finally:
        target.write_text(original)
    assert done.returncode != 0, f"{kind}: the lint passed"
    assert said.lower() in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
