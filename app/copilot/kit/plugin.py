"""The kit's pytest plugin (the `countersign` pytest11 entry point, or `pytest_plugins =
["app.copilot.kit.plugin"]`): its fixtures. The one module of the kit that knows the app's factory;
it hands create_app to the kit (`countersign_app_factory`), so the kit itself, which the CLI's
`actions check` uses too, never imports the app it is registered by."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.copilot.kit import Copilot, migrated_template, running


@pytest.fixture(scope="session")
def countersign_app_factory() -> Callable[..., Any]:
    """The app factory the kit makes its apps with (create_app, imported when a test asks for it)."""
    from app import create_app

    return create_app


@pytest.fixture(scope="session")
def countersign_template_db(tmp_path_factory: pytest.TempPathFactory, countersign_app_factory: Callable[..., Any]) -> Path:
    """A migrated SQLite file made once per session; each test gets a copy."""
    return migrated_template(tmp_path_factory.mktemp("countersign") / "template.sqlite3", factory=countersign_app_factory)


@pytest.fixture
def copilot_config() -> dict[str, Any]:
    """Settings for the copilot fixture's app; override it in a conftest (e.g. ACTIONS_PACKAGE)."""
    return {}


@pytest.fixture
def copilot(
    countersign_template_db: Path, tmp_path: Path, copilot_config: dict[str, Any], countersign_app_factory: Callable[..., Any]
) -> Iterator[Copilot]:
    """An app on a fresh copy of the migrated database, demo seeded, with copilot.model queued
    (offline behaviour when empty) and copilot.clock frozen."""
    with running(countersign_template_db, tmp_path, factory=countersign_app_factory, **copilot_config) as kit:
        yield kit
