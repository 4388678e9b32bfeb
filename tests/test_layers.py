"""DESIGN §4: imports point one way; the engine knows no delivery package and no action by name."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
DELIVERY = ("app.web", "app.api", "app.admin", "app.auth", "app.connectors", "app.cli", "app.actions")


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_engine_imports_no_delivery_package_and_no_action():
    for path in (APP / "copilot").glob("*.py"):
        bad = [m for m in imports_of(path) if m.startswith(DELIVERY)]
        assert not bad, f"{path.name} imports {bad}"


def test_models_extensions_and_errors_import_neither_engine_nor_delivery():
    for name in ("models.py", "extensions.py", "errors.py"):
        bad = [m for m in imports_of(APP / name) if m.startswith(("app.copilot", *DELIVERY))]
        assert not bad, f"{name} imports {bad}"
