"""One SQLAlchemy engine per database and options for the whole test process, not one per test.

Every test makes an app of its own (tests/conftest.py `app`), and Flask-SQLAlchemy gives each app
a new engine. SQLAlchemy keeps its compiled statements in a cache of the engine, keyed by the
engine's dialect, so a new engine compiles every statement again: about a quarter of the suite's
CPU went there. Apps whose engine options are the same (the URL among them) now share one engine,
and with it its dialect, its statement cache and its pool; each test still disposes of the pool's
connections at its end (tests/conftest.py), so no connection crosses from one test to the next."""

from __future__ import annotations

from typing import Any

from flask_sqlalchemy import SQLAlchemy

_make = SQLAlchemy._make_engine
_engines: dict[str, Any] = {}


def _shared_engine(self: SQLAlchemy, bind_key: str | None, options: dict[str, Any], app: Any) -> Any:
    key = repr((bind_key, sorted(options.items(), key=lambda item: item[0])))
    engine = _engines.get(key)
    if engine is None:
        engine = _engines[key] = _make(self, bind_key, options, app)
    return engine


def share_engines() -> None:
    """From now on in this process, an app whose engine options match an earlier app's reuses its engine."""
    SQLAlchemy._make_engine = _shared_engine  # type: ignore[method-assign]
