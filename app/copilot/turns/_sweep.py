"""A pass whose worker died: no heartbeat (turns._runs.alive_key) for the grace period, and its
run becomes `interrupted`, shown with Retry; its conversation's next pass is queued. And a run
left queued with no job (the broker away when its message was kept): queued again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from flask import current_app
from redis.exceptions import RedisError, ResponseError

from app.copilot.turns._jobs import submit
from app.copilot.turns._line import queue_next
from app.copilot.turns._runs import alive_for, alive_key, publish_end
from app.extensions import db, redis_client, won
from app.models import Message, Run, utcnow
from app.status import Role, RunStatus


def sweep_dead(grace_seconds: int, conversation_id: int | None = None) -> list[Run]:
    """Runs whose worker died mid-pass (no heartbeat for grace_seconds) become `interrupted`,
    shown with Retry; their conversations' next passes are queued. A page about to show one
    conversation sweeps just that one."""
    cutoff = utcnow() - timedelta(seconds=grace_seconds)
    stale = sa.select(Run).where(Run.status == RunStatus.RUNNING, Run.updated_at < cutoff).limit(500)
    if conversation_id is not None:
        stale = stale.where(Run.conversation_id == conversation_id)
    ended: list[Run] = []
    runs = list(db.session.scalars(stale))
    try:
        if runs and _lately_started():  # (none is taken for dead before each live one said so again)
            return ended
    except RedisError:
        return ended  # cannot tell a dead worker from a live one: leave them
    for run in runs:
        try:
            if redis_client.client.exists(alive_key(run.id)):
                continue
        except RedisError:
            return ended  # cannot tell a dead worker from a live one: leave them
        if mark_interrupted(run):
            ended.append(run)
    return ended


def _lately_started() -> bool:
    """Whether Redis started less than a "still here" lasts (restarted, and maybe empty): a live
    pass's "still here" may not be written again yet, and the pass would be taken for dead."""
    uptime = _uptime()
    return uptime is not None and uptime < alive_for(current_app.config["TURN_HEARTBEAT"])


def _uptime() -> int | None:
    """How long Redis has been up, in whole seconds (None: it does not say)."""
    try:
        server = redis_client.client.info("server")
    except ResponseError:  # (no INFO: the embedded fakeredis, which lives and dies with its process; a proxy)
        return None
    uptime = server.get("uptime_in_seconds")
    return None if uptime is None else int(uptime)


def _stranded() -> sa.Select[Any]:
    """Runs queued before :cutoff, first in their conversation's line, no pass running there.
    Built once: its aliases cost 1.7 ms to build, 20 times what the statement costs to run."""
    first = sa.orm.aliased(Run)
    ahead = sa.orm.aliased(Run)
    return (
        sa.select(first.id)
        .where(first.status == RunStatus.QUEUED, first.queued_at < sa.bindparam("cutoff"))
        .where(
            ~sa.select(ahead.id)
            .where(
                ahead.conversation_id == first.conversation_id,
                sa.or_(
                    ahead.status == RunStatus.RUNNING,
                    sa.and_(
                        ahead.status == RunStatus.QUEUED,
                        sa.tuple_(ahead.queued_at, ahead.id) < sa.tuple_(first.queued_at, first.id),
                    ),
                ),
            )
            .exists()
        )
        .order_by(first.queued_at)
        .limit(500)
    )


_STRANDED = _stranded()


def resubmit_stranded(after_seconds: int) -> list[int]:
    """Hand again to the runner each run queued for more than `after_seconds` that is first in
    its conversation's line with no pass running there: its job was never queued (the broker was
    away when its message was kept: the message stays, the job is lost) or was lost since. Once a
    period each (a Redis key), so that a job merely waiting its turn is not queued over and over;
    a second job is harmless anyway (the claim runs a pass once). A run queued before Redis last
    started is handed again at once: a Redis that came back empty took its job. Its ids."""
    cutoff = utcnow() - timedelta(seconds=after_seconds)
    try:
        uptime = _uptime()
    except RedisError:
        return []  # (the broker is away: next time)
    if uptime is not None and uptime < after_seconds:
        # (Redis's uptime is two whole-second clocks apart: it started up to a second after now −
        # uptime. A job queued in the second after its start may go twice: the claim decides.)
        cutoff = utcnow() - timedelta(seconds=uptime - 1)
    stranded = list(db.session.scalars(_STRANDED, {"cutoff": cutoff}))
    db.session.rollback()
    handed: list[int] = []
    for run_id in stranded:
        try:
            if not redis_client.client.set(f"turn-resubmitted:{run_id}", "1", nx=True, ex=max(1, after_seconds)):
                continue
        except RedisError:
            return handed  # (the broker is away too: next time)
        submit(run_id)
        handed.append(run_id)
    return handed


# A run's error once the sweep ends it: its pass ran on a worker or on the ASGI process (a streamed
# message's), and what the sweep knows is that its heartbeat stopped, not which died or why.
SILENT = "the process running this turn went silent mid-turn (no heartbeat): it stopped, or lost Redis"


def mark_interrupted(run: Run) -> bool:
    """End a running pass whose worker is gone: a notice with Retry, the turn-end event."""
    if not won(
        sa.update(Run).where(Run.id == run.id, Run.status == RunStatus.RUNNING).values(status=RunStatus.INTERRUPTED, error=SILENT)
    ):
        db.session.rollback()
        return False
    notice = Message(
        conversation_id=run.conversation_id,
        role=Role.ERROR,
        run_id=run.id,
        step=run.step + 1,
        text="This turn was interrupted before it finished. Your message is saved; press Retry to run it again.",
    )
    db.session.add(notice)
    db.session.commit()
    publish_end(run, run.step + 1, RunStatus.INTERRUPTED, [notice])
    queue_next(run.conversation_id)
    return True
