"""DESIGN §4: no import circle anywhere in app/, and no module reaches behind another package's face.
An import inside a function counts as an edge too: it only moves the circle to the first call. Only
an import under `if TYPE_CHECKING:` is left out: it never runs (mypy reads it, Python does not)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"


def modules_under(root: Path) -> dict[str, Path]:
    """Every module under `root` (a package folder) by its dotted name: app/copilot/__init__.py is
    app.copilot, app/copilot/turns/_runs.py app.copilot.turns._runs."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runs(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module that Python may run: at the top or inside a function,
    not under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield from _runs(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            yield from _runs(node)


def imported(module: str, path: Path, known: set[str]) -> set[tuple[str, str | None]]:
    """What `module` imports among `known` modules, as (module, name taken from it or None):
    `from app.copilot import events` is (app.copilot.events, None), `from app.copilot.turns
    import engine` is (app.copilot.turns, "engine"); relative imports are made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[tuple[str, str | None]] = set()
    for node in _runs(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names if alias.name in known)
            continue
        base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
        origin = ".".join([*base, *([node.module] if node.module else [])])
        for alias in node.names:
            if f"{origin}.{alias.name}" in known:
                found.add((f"{origin}.{alias.name}", None))
            elif origin in known:
                found.add((origin, alias.name))
    return found


def graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules it imports (a package's own __init__ that Python runs first is not an
    edge: importing app.copilot.turns._runs runs app.copilot.turns, which is the package's face)."""
    modules = modules_under(root)
    return {m: {target for target, _ in imported(m, p, set(modules))} - {m} for m, p in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def within(module: str, package: str) -> bool:
    """`module` is `package`'s face or one of its modules (app.copilot.turns._runs is within
    app.copilot.turns; app.copilot.turnstile is not)."""
    return module == package or module.startswith(package + ".")


def reach_ins(root: Path) -> list[str]:
    """Imports of what is private to another module or package: a module whose name starts with
    `_` is its package's (only modules inside that package may import it), and a name starting
    with `_` is its module's (no other module imports it)."""
    modules = modules_under(root)
    bad = []
    for module, path in modules.items():
        for target, name in sorted(imported(module, path, set(modules)), key=str):
            parts = target.split(".")
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__") and not within(module, owner):
                    bad.append(f"{module} imports {target}, private to {owner}")
            if name is not None and name.startswith("_") and not name.startswith("__"):
                bad.append(f"{module} imports {name} from {target}")
    return bad


def test_no_import_circle_anywhere_in_app():
    found = circles(graph(APP))
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_no_module_imports_another_packages_private_modules_or_names():
    bad = reach_ins(APP)
    assert not bad, "\n".join(bad)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


@pytest.mark.parametrize(
    "b_imports_a",
    [
        "from pkg import a",
        "from pkg.a import thing",
        "import pkg.a",
        "from . import a",
        "from .a import thing",
        "def later():\n    from pkg.a import thing",
    ],
)
def test_the_check_finds_a_circle_however_it_is_written(tmp_path, b_imports_a):
    root = _package(tmp_path, {"a.py": "from pkg.b import other\nthing = 1\n", "b.py": f"{b_imports_a}\nother = 2\n"})
    assert circles(graph(root)) == [["pkg.a", "pkg.b"]]


def test_the_check_finds_a_circle_through_a_packages_face(tmp_path):
    root = _package(
        tmp_path,
        {
            "turns/__init__.py": "from pkg.turns._runs import start\n",
            "turns/_runs.py": "from pkg.approvals import create\nstart = 1\n",
            "approvals/__init__.py": "from pkg.approvals._machine import create\n",
            "approvals/_machine.py": "def create():\n    from pkg.turns import start\n",
        },
    )
    assert circles(graph(root)) == [["pkg.approvals", "pkg.approvals._machine", "pkg.turns", "pkg.turns._runs"]]


def test_the_check_sees_no_circle_in_a_one_way_chain_nor_in_type_checking_imports(tmp_path):
    root = _package(
        tmp_path,
        {
            "a.py": "from pkg.b import other\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import thing\nother = 2\n",
        },
    )
    assert graph(root)["pkg.a"] == {"pkg.b"} and circles(graph(root)) == []


def test_the_check_finds_a_reach_into_another_packages_private_module_or_name(tmp_path):
    root = _package(
        tmp_path,
        {
            "turns/__init__.py": "from pkg.turns._runs import start\n",
            "turns/_runs.py": "from pkg.approvals._machine import create\nstart = 1\n",
            "approvals/__init__.py": "from pkg.approvals._machine import create\n",
            "approvals/_machine.py": "def create():\n    pass\ndef _claim():\n    pass\n",
            "approvals/_revise.py": "from pkg.approvals._machine import _claim\n",
        },
    )
    assert reach_ins(root) == [
        "pkg.approvals._revise imports _claim from pkg.approvals._machine",
        "pkg.turns._runs imports pkg.approvals._machine, private to pkg.approvals",
    ]


def test_no_engine_package_imports_the_front_door():
    """The worker runs turns through the turns package alone: nothing under app.copilot's
    packages imports app.copilot itself (the front door the deliveries call), not even lazily;
    only the kit, which drives the engine as a delivery would, may."""
    edges = graph(APP)
    packages = ("app.copilot.turns", "app.copilot.approvals", "app.copilot.actions", "app.copilot.audit")
    bad = sorted(m for m, targets in edges.items() if any(within(m, p) for p in packages) and "app.copilot" in targets)
    assert not bad, f"{bad} import the front door"
