"""The events a page must learn to show the truth — a turn's end, a card's change, a new title —
that Redis was away for (app.copilot.events.publish), kept by the app in this process (at most
KEPT_MAX, the oldest let go first) until events.publish_later() publishes them in their order:
before this process's next event, and by a thread that tries once a second until none is kept
(app.copilot.turns._kept). Without it, a reply streaming when Redis stopped stayed half-written,
its Stop button on, on every open page until a reload, later turns' replies arriving live beside
it (a helper's try, 2026-12-07).

A turn's start and its words are not kept, nor an event a stop holds back (`unless`): a start
shown after its end would open a reply that never ends, and the end carries what the words said."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from flask import current_app

from app.status import PASS_ENDS, EventType

log = logging.getLogger(__name__)

KEPT_MAX = 1000
Kept = tuple[int, str, dict[str, Any] | None, dict[str, Any]]  # conversation, type, known, data


def kept() -> deque[Kept]:
    """The app's kept events, oldest first."""
    extensions = current_app.extensions
    if "events_kept" not in extensions:
        extensions["events_kept"] = deque(maxlen=KEPT_MAX)
        extensions["events_kept_flushing"] = threading.Lock()
    held: deque[Kept] = extensions["events_kept"]
    return held


def flushing() -> threading.Lock:
    """Held by the thread publishing the kept events (one at a time)."""
    kept()
    lock: threading.Lock = current_app.extensions["events_kept_flushing"]
    return lock


def waiting() -> bool:
    return bool(current_app.extensions.get("events_kept"))


def keep(conversation_id: int, type: str, known: dict[str, Any] | None, data: dict[str, Any]) -> None:
    """Keep an event Redis was away for, if a page must learn it (see above). The keys its append
    was to delete are not deleted later (a pass's end: its heartbeat and stop keys, which expire by
    themselves): by then they may be a later pass's."""
    if type == EventType.TEXT or (type == EventType.TURN and data.get("state") not in PASS_ENDS):
        return
    held = kept()
    if len(held) == held.maxlen:
        log.warning("more than %d events wait for Redis: the oldest is let go", KEPT_MAX)
    held.append((conversation_id, type, known, data))
    try_again_soon()


def try_again_soon() -> None:
    """Start the app's sender of what is kept, if it is not running (turns.init_app registers it
    as `kept.sender`; none: kept for the next event)."""
    sender = current_app.extensions.get("kept.sender")
    if sender is not None:
        sender()
