"""The app's log lines, as a server without a logging setup of its own writes them (gunicorn and
uvicorn leave the root logger alone): each with its time, process id, level and logger; the app's
own INFO lines in, the libraries' INFO lines out; a logging setup made before the app is kept."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (\d+) (INFO|WARNING) ([\w.]+): (.*)$")

LOGS = """
import logging, os
{before}
from app import create_app
create_app({{"SWEEP_ON_START": False, "SQLALCHEMY_DATABASE_URI": "sqlite://"}})
print("pid", os.getpid(), flush=True)
logging.getLogger("app.copilot.events").warning("event turn of conversation 3 not published")
logging.getLogger("app.copilot.events").info("4 events kept while Redis was away published")
logging.getLogger("httpx").info("HTTP Request: POST http://model/v1/chat/completions")
logging.getLogger("app.copilot.events").debug("below the level")
"""


def _logged(before: str = "", level: str | None = None) -> tuple[str, list[str]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COUNTERSIGN_ENV": "testing"}
    if level:
        env["LOG_LEVEL"] = level
    done = subprocess.run(
        [sys.executable, "-c", LOGS.format(before=before)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    pid = done.stdout.split()[1]
    said = ("conversation 3", "HTTP Request", "events kept")
    ours = [line for line in done.stderr.splitlines() if any(words in line for words in said)]
    return pid, ours


def test_each_line_says_when_which_process_how_bad_and_whose():
    pid, lines = _logged()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(m[1], m[2], m[3], m[4]) for m in parsed if m] == [
        (pid, "WARNING", "app.copilot.events", "event turn of conversation 3 not published"),
        (pid, "INFO", "app.copilot.events", "4 events kept while Redis was away published"),
    ]  # (httpx's INFO line is not written)


def test_log_level_quiets_the_apps_info_lines():
    _, lines = _logged(level="warning")
    assert [line.split(": ", 1)[1] for line in lines] == ["event turn of conversation 3 not published"]


def test_a_logging_setup_made_before_the_app_is_kept():
    _, lines = _logged(before='logging.basicConfig(format="mine %(message)s", level=logging.INFO)')
    assert lines == [
        "mine event turn of conversation 3 not published",
        "mine 4 events kept while Redis was away published",
        "mine HTTP Request: POST http://model/v1/chat/completions",
    ]


AWAY = (
    "event text of conversation 7 not sent to its open pages (Redis: Error 111 connecting to 127.0.0.1:6379."
    " Connection refused.); they catch up once it answers"
)


def test_redis_away_for_many_events_is_one_line_then_one_saying_how_many_more(app, caplog, monkeypatch):
    # A helper's try: 53 "not published" lines for one reply streamed during an outage.
    from redis.exceptions import ConnectionError as RedisDown

    from app.copilot import events
    from app.status import EventType

    def away(*args, **kwargs):
        raise RedisDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    append = events._append
    monkeypatch.setattr(events, "_append", away)
    monkeypatch.setattr(events.unpublished, "seconds", 3600.0)  # (a stalled machine still holds them back)
    with app.app_context(), caplog.at_level("INFO", logger="app.copilot.events"):
        for chunk in range(50):
            assert events.publish(7, EventType.TEXT, run=1, step=1, text=f"chunk {chunk}") is None
        said = [r.getMessage() for r in caplog.records if r.name == "app.copilot.events"]
        assert said == [AWAY]
        monkeypatch.setattr(events.unpublished, "seconds", 0.0)  # (the next is past the quiet time)
        events.publish(7, EventType.TEXT, run=1, step=1, text="one more")
        said = [r.getMessage() for r in caplog.records if r.name == "app.copilot.events"]
        assert len(said) == 2 and re.search(r"\(49 more like it since the last such line, \d+ s ago\)$", said[1]), said
        monkeypatch.setattr(events.unpublished, "seconds", 3600.0)
        for _ in range(3):
            events.publish(7, EventType.TEXT, run=1, step=1, text="held back")
        monkeypatch.setattr(events, "_append", append)  # (Redis answers again: its end is said once)
        for _ in range(3):
            assert events.publish(7, EventType.TEXT, run=1, step=1, text="back") is not None
        said = [r.getMessage() for r in caplog.records if r.name == "app.copilot.events"][2:]
        assert said == ["events reach open pages again: Redis answers (3 more warnings like the last held back)"]
        monkeypatch.setattr(events, "_append", away)  # (a new outage is said at once)
        events.publish(7, EventType.TEXT, run=1, step=1, text="away again")
        said = [r.getMessage() for r in caplog.records if r.name == "app.copilot.events"][3:]
    assert said == [AWAY]


def test_a_librarys_repeated_line_is_held_to_one_every_few_seconds_by_the_filter(caplog):
    # Dramatiq's consumer logged its connection error every 3 s of an outage (CRITICAL, each time).
    import logging

    from app.logs import Sparing

    logger = logging.getLogger("tests.a_library")
    quiet = Sparing(seconds=3600.0, level=logging.WARNING)  # (said as a warning: the app rides the outage out)
    logger.addFilter(quiet)
    try:
        with caplog.at_level("INFO", logger="tests.a_library"):
            for _ in range(5):
                logger.critical("Consumer encountered a connection error: refused")
            quiet.seconds = 0.0
            logger.critical("Consumer encountered a connection error: refused")
    finally:
        logger.removeFilter(quiet)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said[0] == ("WARNING", "Consumer encountered a connection error: refused")
    assert said[1][0] == "WARNING" and re.fullmatch(
        r"Consumer encountered a connection error: refused \(4 more like it since the last such line, \d+ s ago\)", said[1][1]
    )
    assert len(said) == 2
