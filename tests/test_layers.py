"""DESIGN §4: imports point one way; the engine knows no delivery package and no action by name.
`web | api | admin | auth | connectors | mcp | cli` → `copilot` → `models | extensions | errors`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"
DELIVERY = ("app.web", "app.api", "app.admin", "app.auth", "app.connectors", "app.mcp", "app.cli", "app.actions")
ENGINE = ("app.copilot",)
# A delivery package reaches the engine itself, not through another delivery package; only
# app.auth, which says who is who (tokens, sessions), is shared by them all.
SHARED = ("app.auth",)


def module_name(path: Path) -> str:
    """app/copilot/agent.py -> app.copilot.agent; app/mcp/__init__.py -> app.mcp."""
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module `source` imports, at the top or inside a function, as absolute names:
    `from app import mcp` counts as app.mcp, `from ..mcp import x` (in app.copilot.agent) too."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names)
    return found


def imports_of(path: Path) -> set[str]:
    return imports_in(path.read_text(), module_name(path), is_package=path.name == "__init__.py")


def within(name: str, packages: tuple[str, ...]) -> bool:
    """`name` is one of `packages` or inside one (app.mcp.asgi is in app.mcp; app.mcpx is not)."""
    return any(name == p or name.startswith(p + ".") for p in packages)


def modules_of(package: str) -> list[Path]:
    folder = APP.joinpath(*package.split(".")[1:])
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]


def test_the_engine_imports_no_delivery_package_and_no_action():
    for path in modules_of("app.copilot"):
        bad = sorted(m for m in imports_of(path) if within(m, DELIVERY))
        assert not bad, f"{path.relative_to(APP)} imports {bad}"


def test_models_extensions_errors_and_statuses_import_neither_engine_nor_delivery():
    paths = [APP / "extensions.py", APP / "errors.py", *(APP / "models").glob("*.py"), *(APP / "status").glob("*.py")]
    assert len(paths) > 6  # the two packages were found
    for path in paths:
        bad = sorted(m for m in imports_of(path) if within(m, (*ENGINE, *DELIVERY)))
        assert not bad, f"{path.relative_to(APP)} imports {bad}"


@pytest.mark.parametrize("package", ["app.mcp", "app.connectors"])
def test_mcp_and_connectors_reach_the_engine_not_another_delivery_package(package):
    others = tuple(d for d in DELIVERY if d != package and d not in SHARED)
    for path in modules_of(package):
        bad = sorted(m for m in imports_of(path) if within(m, others))
        assert not bad, f"{path.relative_to(APP)} imports {bad}"


@pytest.mark.parametrize(
    "line",
    [
        "import app.mcp",
        "import app.mcp.asgi as served",
        "from app.mcp import create_mcp_app",
        "from app import mcp",
        "from .. import mcp",
        "from ..mcp import create_mcp_app",
        "def lazily():\n    from app.mcp import create_mcp_app",
    ],
)
def test_the_check_sees_the_engine_importing_mcp_however_it_is_written(line):
    assert any(within(m, DELIVERY) for m in imports_in(line, "app.copilot.agent"))


@pytest.mark.parametrize("line", ["import app.mcpx", "from app.copilot import mcp_names", "from . import agent"])
def test_the_check_does_not_mistake_a_neighbour_for_mcp(line):
    assert not any(within(m, DELIVERY) for m in imports_in(line, "app.copilot.agent"))
