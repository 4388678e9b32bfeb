"""What this process kept while Redis was away — the events a page must learn (app.copilot
.kept_events) and the passes it could not queue (here) — sent by a thread of its own, once a
second from the first thing kept until nothing is (then the thread ends). A page learns a Stop's
end, a card's change or a reply's end within about a second of Redis answering, and a message sent
during the outage is queued then, whether or not this process gets another request: helpers'
tries (2026-12-07) found a Stop pressed during an outage unshown for minutes, its web process
publishing nothing more, and a message sent during it left to the workers' housekeeping
(`TURN_DEAD_AFTER`, about a minute) whenever no later request reached the process holding it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from flask import Flask, current_app

from app.copilot import events, kept_events

log = logging.getLogger(__name__)

TRY_EVERY_S = 1.0
UNSENT_MAX = 10_000  # passes a process keeps while Redis is away (older ones: turns._sweep's)
_starting = threading.Lock()  # (whether an app's sender runs: decided under it, start and end alike)


def send(run_id: int | None) -> None:
    """Hand the passes kept here, then `run_id`'s, to the app's runner, in order, each once; at the
    first it cannot take (Redis away: the person's message is committed, so it must not be lost),
    `run_id` is kept too and the sender started. None: only the kept ones (quietly while Redis is
    still away: the first try said so)."""
    runner = current_app.extensions["turns"]
    unsent: list[int] = current_app.extensions.setdefault("turns_unsent", [])
    for waiting in dict.fromkeys([*unsent, *([] if run_id is None else [run_id])]):
        try:
            runner.submit(waiting)
        except Exception as error:
            if not _broker_away(error):
                log.exception("could not queue the pass of run %s", waiting)
            elif run_id is not None:
                log.warning("could not queue the pass of run %s (Redis: %s); it is queued again later", run_id, error)
            if run_id is not None and run_id not in unsent:
                unsent.append(run_id)
                del unsent[:-UNSENT_MAX]
            send_until_sent()
            return
        if waiting != run_id:
            log.info("the pass of run %s, kept while Redis was away, is queued", waiting)
        with contextlib.suppress(ValueError):  # (another thread's send may have sent it first)
            unsent.remove(waiting)


def has_unsent() -> bool:
    return bool(current_app.extensions.get("turns_unsent"))


def _broker_away(error: Exception) -> bool:
    """Whether `error` says Redis did not answer (Dramatiq's broker wraps redis-py's errors)."""
    from dramatiq.errors import BrokerConnectionError  # (here, not at start: the web may never queue)
    from redis.exceptions import RedisError

    return isinstance(error, RedisError | BrokerConnectionError)


def send_until_sent() -> None:
    """Make sure the app's sender of what is kept runs (also kept_events.try_again_soon's)."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    with _starting:
        if app.extensions.get("kept_sending"):
            return
        app.extensions["kept_sending"] = True
    threading.Thread(target=_send_until_none_kept, args=(app,), name="countersign-kept", daemon=True).start()


def _send_until_none_kept(app: Flask) -> None:
    while True:
        time.sleep(TRY_EVERY_S)
        with app.app_context():
            try:
                events.publish_later()
                send(None)
            except Exception:  # (never the sender's end while something is kept: it tries again)
                log.exception("could not send what was kept while Redis was away")
            with _starting:  # (a keeper keeps first, then asks: one asking after this sees no sender)
                if not (kept_events.waiting() or has_unsent()):
                    app.extensions["kept_sending"] = False
                    return
