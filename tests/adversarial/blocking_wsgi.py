"""The app for the SIGKILL test: DeletePost.handle() writes its process id to a file and then waits
to be killed, so the test knows which gunicorn worker is inside handle() and when."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from app.actions.delete_post import DeletePost
from wsgi import app

MARK = Path(os.environ["COUNTERSIGN_TEST_HANDLE_MARK"])


def wait_to_be_killed(self: Any, ctx: Any, input: Any) -> Any:
    with MARK.open("a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(120)
    raise RuntimeError("this worker should have been killed inside handle()")


DeletePost.handle = wait_to_be_killed  # type: ignore[method-assign]

__all__ = ["app"]
