"""Where the app's log lines go when nothing else said: standard error, each line with its time, its
process id, its level and its logger, so the lines of several web and worker processes can be put
in order and told apart (a helper read bare messages: "event turn of conversation 3 not published:
…", with no time and no process). The app's own loggers (`app.…`) log from LOG_LEVEL; the
libraries' from WARNING (httpx alone would log every model request at INFO). A server or a test
that configured logging already (a handler on the root logger) is left as it is."""

from __future__ import annotations

import logging
import threading
import time

from flask import Flask

FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def init_app(app: Flask) -> None:
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("app").setLevel(app.config["LOG_LEVEL"].upper())


class Sparing:
    """A warning said at most once every `seconds` by this process, the ones held back counted in
    the next: an outage of Redis is one line every few seconds, not one per streamed chunk, per
    reconnecting page or per poll (a helper counted 53 lines for one reply)."""

    made: list[Sparing] = []  # (every one, so that tests can start each afresh: forget())

    def __init__(self, logger: logging.Logger, seconds: float = 10.0) -> None:
        self.logger, self.seconds = logger, seconds
        self._lock = threading.Lock()
        self.forget()
        Sparing.made.append(self)

    def forget(self) -> None:
        """As if nothing had been said yet."""
        self._said_at, self._held_back = -float("inf"), 0

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._said_at < self.seconds:
                self._held_back += 1
                return
            held_back, self._held_back, self._said_at = self._held_back, 0, now
        more = f" ({held_back} more like it since the last such line)" if held_back else ""
        self.logger.warning(message + more, *args)
