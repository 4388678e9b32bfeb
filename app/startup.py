"""Start-up without the garbage collector's full passes (P4).

Importing Flask, SQLAlchemy, our models and the actions makes several hundred thousand objects
that live as long as the process. While they are made, CPython's collector runs full passes over
all of them again and again (about a seventh of `create_app()`'s time), and finds nothing to free.
Importing this module holds the collector off; `app/__init__.py` imports it first and, once its
own imports are done, freezes what they made (`gc.freeze`, once a process) and lets the collector
run again. `create_app()` holds it off for its own time with `held()` and freezes nothing: a test
process that makes many apps collects them as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_was_enabled = gc.isenabled()
gc.disable()


def imported() -> None:
    """The app package's imports are done: what they made lives as long as the process, so it is
    moved out of the collector's sight (`gc.freeze`, once), and the collector runs again."""
    gc.freeze()
    if _was_enabled:
        gc.enable()


@contextmanager
def held() -> Iterator[None]:
    """No collection for the block's time; the collector's state before it afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
