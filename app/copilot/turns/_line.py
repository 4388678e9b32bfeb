"""A conversation's line: its passes run one at a time, in the order they were queued. A pass is
claimed by one conditional UPDATE (at most once, first in line, none of the conversation's
running), by the worker that takes its job or, for a run its caller runs at once, as the run
is written (runs.start's `claim`); a pass that ends hands the line's next one to a worker."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.orm import aliased, joinedload
from sqlalchemy.orm.attributes import set_committed_value

from app.copilot.approvals import NOTICE
from app.copilot.turns import _jobs as jobs
from app.extensions import commit_kept, core, db, won
from app.models import Conversation, Message, Run, User, utcnow
from app.status import Role, RunStatus

_line = aliased(Run)
_conversation: sa.BindParameter[int] = sa.bindparam("its_conversation")  # (not a column's name)
_CLAIM = (
    sa.update(Run)
    .where(
        Run.id == sa.bindparam("run_id"),
        Run.status == RunStatus.QUEUED,
        # first in its conversation's line
        Run.id
        == sa.select(_line.id)
        .where(_line.conversation_id == _conversation, _line.status == RunStatus.QUEUED)
        .order_by(_line.queued_at, _line.id)
        .limit(1)
        .scalar_subquery(),
        # and no pass of the conversation running
        ~sa.select(_line.id).where(_line.conversation_id == _conversation, _line.status == RunStatus.RUNNING).exists(),
    )
    .values(status=RunStatus.RUNNING, updated_at=sa.bindparam("now"))
)


class Claimed(NamedTuple):
    """A run claimed as it was written (start's `claim`), with its message, and its conversation's
    person with their tenant, as the request that wrote it read them: what its pass would read."""

    run: Run
    person: User


class Adopted(NamedTuple):
    """A claimed run, its person and its conversation's history, as its pass takes them, and
    whether news waits for the model before the person's message (news_before)."""

    run: Run
    person: User
    history: str
    news: bool


_earlier = aliased(Message)
Column = sa.ColumnExpressionArgument[Any]  # (a column, or a bound parameter)


def news_before(conversation_id: Column, said: Column) -> sa.ColumnElement[bool]:
    """Where a message is news for the model before the person's message `said`: a delivery's
    notice (delivery.settle's, which belongs to no run) written since their previous message."""
    previous = (
        sa.select(sa.func.max(_earlier.id))
        .where(_earlier.conversation_id == conversation_id, _earlier.role == Role.USER, _earlier.id < said)
        .correlate_except(_earlier)  # (inside a statement of the run and its conversation: theirs)
    )
    return sa.and_(
        Message.conversation_id == conversation_id,
        Message.role == NOTICE,
        Message.run_id.is_(None),
        Message.id < said,
        Message.id > sa.func.coalesce(previous.scalar_subquery(), 0),
    )


# The conversation's history, read only while the claim stands: the run still running, and
# claimed when its message was written (a claim since, a worker's, wrote another updated_at);
# with it, whether news waits (so that the pass reads the news only when there is some).
_HISTORY_IF_STILL_OURS = (
    sa.select(Conversation.history, sa.exists().where(news_before(Conversation.id, Run.message_id)))
    .join(Run, Run.conversation_id == Conversation.id)
    .where(Run.id == sa.bindparam("run_id"), Run.status == RunStatus.RUNNING, Run.updated_at == sa.bindparam("claimed_at"))
)


def adopt(claimed: Claimed) -> Adopted | None:
    """A claimed run and its person, copied into this session as they were read (the request's own
    objects are left as they are), with the conversation's history, if the claim still stands:
    None when the run was ended or claimed again since (a pass that began later than
    TURN_DEAD_AFTER, after the sweep ended it interrupted and a Retry queued it again: that pass
    is the worker's). One read, which begins the pass's reading transaction (turns._history.prepare
    ends it)."""
    run = claimed.run
    read = core(_HISTORY_IF_STILL_OURS, {"run_id": run.id, "claimed_at": run.updated_at}).first()
    if read is None:
        db.session.rollback()
        return None
    history, news = read
    return Adopted(db.session.merge(run, load=False), db.session.merge(claimed.person, load=False), history, bool(news))


# The run with its message, and its conversation locked: a claim waits for any transaction that
# holds the conversation (a message being written, which may claim its own run as it is: see
# claim_now), so that its UPDATE, a new statement, sees that transaction's runs (PostgreSQL's
# READ COMMITTED; SQLite's writers take turns anyway).
_LOCKED_RUN = (
    sa.select(Run)
    .join(Conversation, Conversation.id == Run.conversation_id)
    .options(joinedload(Run.message))
    .where(Run.id == sa.bindparam("run_id"))
    .with_for_update(of=Conversation)
)


def claim(run_id: int) -> Run | None:
    """Take the run's pass for this worker: only if it is queued, first in its conversation's line,
    and no other pass of the conversation is running (the running pass queues the next one when it
    ends). One conditional UPDATE decides; one worker wins. (The run is read with its message,
    its conversation locked: _LOCKED_RUN.)"""
    run = db.session.scalars(_LOCKED_RUN, {"run_id": run_id}).unique().first()
    if run is None or run.status != RunStatus.QUEUED:
        db.session.rollback()
        return None
    now = utcnow()
    if not _won_claim(run, now):
        db.session.rollback()
        return None
    commit_kept(run, status=RunStatus.RUNNING, updated_at=now)  # (what the UPDATE wrote, not read again)
    return run


def _won_claim(run: Run, now: datetime) -> bool:
    """The claim's conditional UPDATE (_CLAIM) for this run: True when it won."""
    return won(_CLAIM, {"run_id": run.id, "its_conversation": run.conversation_id, "now": now})


_NEXT_QUEUED = (
    sa.select(Run.id)
    .where(Run.conversation_id == sa.bindparam("conversation_id"), Run.status == RunStatus.QUEUED)
    .order_by(Run.queued_at, Run.id)
    .limit(1)
)


def queue_next(conversation_id: int) -> None:
    """Hand the conversation's next queued pass to a worker (after one ended)."""
    following = core(_NEXT_QUEUED, {"conversation_id": conversation_id}).scalar()
    db.session.rollback()
    if following is not None:
        jobs.submit(following)


def claim_now(run: Run) -> bool:
    """Claim a run being written, in its own transaction (start's `claim`)."""
    db.session.flush()
    now = utcnow()
    if not _won_claim(run, now):
        return False
    set_committed_value(run, "status", RunStatus.RUNNING)
    set_committed_value(run, "updated_at", now)
    return True
