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


class Sparing(logging.Filter):
    """A warning said at most once every `seconds` by this process, the ones held back counted in
    the next, and with ok() one line when what went wrong is over (the count of the rest): an
    outage of Redis is a line every few seconds and one at its end, not one per streamed chunk,
    per reconnecting page or per poll (a helper counted 53 lines for one reply). Also a filter for
    a library's logger (Dramatiq's consumer says its connection error every 3 s)."""

    made: list[Sparing] = []  # (every one, so that tests can start each afresh: forget())

    def __init__(self, logger: logging.Logger | None = None, seconds: float = 10.0, level: int | None = None) -> None:
        super().__init__()
        self.logger, self.seconds, self.level = logger, seconds, level  # (level: a filter's records', said at)
        self._lock = threading.Lock()
        self.forget()
        Sparing.made.append(self)

    def forget(self) -> None:
        """As if nothing had been said yet."""
        self._said_at, self._held_back, self.failing = -float("inf"), 0, False

    def _say(self) -> str | None:
        """None: hold this one back; else say it, with what was held back since the last."""
        now = time.monotonic()
        with self._lock:
            self.failing = True
            if now - self._said_at < self.seconds:
                self._held_back += 1
                return None
            held_back, self._held_back, said_at, self._said_at = self._held_back, 0, self._said_at, now
        return f" ({held_back} more like it since the last such line, {now - said_at:.0f} s ago)" if held_back else ""

    def warning(self, message: str, *args: object) -> None:
        more = self._say()
        if more is not None and self.logger is not None:
            self.logger.warning(message + more, *args)

    def filter(self, record: logging.LogRecord) -> bool:
        more = self._say()
        if more:
            record.msg = f"{record.msg}{more}"
        if self.level is not None:
            record.levelno, record.levelname = self.level, logging.getLevelName(self.level)
        return more is not None

    def ok(self, message: str) -> None:
        """It works again: said once (at INFO), with the count held back since the last warning.
        Cheap when nothing failed (one attribute read): call it on every success."""
        if not self.failing:
            return
        with self._lock:
            if not self.failing:
                return
            held_back, self._held_back, self.failing, self._said_at = self._held_back, 0, False, -float("inf")
        if self.logger is not None:
            more = f" ({held_back} more warning{'s' if held_back > 1 else ''} like the last held back)" if held_back else ""
            self.logger.info(message + more)
