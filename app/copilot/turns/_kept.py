"""What this process kept while Redis was away — the events a page must learn (app.copilot
.kept_events) and the passes it could not queue (turns._jobs) — tried again once Redis answers:
before a request to this process while any is kept (at most once a second), and at a worker's
housekeeping. A web process that kept a card's change or a Stop's end sends it with its next
request of any kind (a helper's try, 2026-12-07: a Stop pressed during an outage stayed unshown
for minutes, its process publishing nothing more); one that gets none keeps it until one comes."""

from __future__ import annotations

import logging
import time

from flask import current_app

from app.copilot import events, kept_events
from app.copilot.turns import _jobs

log = logging.getLogger(__name__)

TRY_EVERY_S = 1.0


def send_kept(now: bool = False) -> None:
    """Publish the kept events and queue the kept passes, if any are kept; unless `now`, not
    within TRY_EVERY_S of the last try (a request during an outage tries once a second at most)."""
    extensions = current_app.extensions
    if not (kept_events.waiting() or _jobs.has_unsent()):
        return
    if not now and time.monotonic() - extensions.get("kept_tried_at", 0.0) < TRY_EVERY_S:
        return
    extensions["kept_tried_at"] = time.monotonic()
    try:
        events.publish_later()
        _jobs.submit_unsent()
    except Exception:  # (never the request's failure: what is kept waits for the next try)
        log.exception("could not send what was kept while Redis was away")
