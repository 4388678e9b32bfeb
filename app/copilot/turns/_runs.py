"""The queue side of turns: a person's message, an answered card or a retry becomes a queued
run, committed before any worker sees it; a conversation's passes run one at a time, in order.
No function here waits on a model (DESIGN §6.10): turns.execute runs the pass in a worker."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from redis.exceptions import RedisError
from sqlalchemy.orm.attributes import set_committed_value

from app.copilot import events
from app.copilot.approvals import Actor
from app.copilot.text import first_title
from app.copilot.turns import _jobs as jobs
from app.copilot.turns._line import Claimed, claim_now, queue_next
from app.copilot.turns._rows import as_written, message_and_run
from app.errors import AgentNotItsTurn, NotFound, ServiceUnavailable
from app.extensions import commit_kept, core, db, on_loop, redis_client, won
from app.models import Approval, Conversation, Message, Run, utcnow
from app.status import FINAL, GOING, RETRYABLE, EventType, Role, RunNext, RunStatus

log = logging.getLogger(__name__)

STOP_FOR = 3600  # seconds a stop request waits for its pass to notice it

NOTHING_RAN = "Stopped. Nothing ran."  # a stopped pass's notice when nothing ran in it


def narrow(*toolsets: Sequence[str] | None) -> tuple[str, ...] | None:
    """The toolsets every one of these allows (None allows all): a run never reaches more than
    any credential or conversation it comes from."""
    out: set[str] | None = None
    for names in toolsets:
        if names is not None:
            out = set(names) if out is None else out & set(names)
    return None if out is None else tuple(sorted(out))


def split_toolsets(stored: str | None) -> tuple[str, ...] | None:
    """A stored comma list as toolsets; NULL means the app's (no limit of its own)."""
    return None if stored is None else tuple(t for t in stored.split(",") if t)


def joined(toolsets: tuple[str, ...] | None) -> str | None:
    return None if toolsets is None else ",".join(toolsets)


# The statements of a turn's every message and pass, built once: building one costs several
# times what running it costs (SQLAlchemy's statement objects and their cache keys).
def _hold_live_statement(nowait: bool) -> sa.Select[Any]:
    return (
        sa.select(
            Conversation.title,
            sa.select(Run.toolsets)
            .where(Run.conversation_id == Conversation.id)
            .order_by(Run.id.desc())
            .limit(1)
            .scalar_subquery(),
        )
        .where(Conversation.id == sa.bindparam("conversation_id"), Conversation.deleted_at.is_(None))
        .with_for_update(of=Conversation, nowait=nowait)
    )


_HOLD_LIVE, _HOLD_LIVE_AT_ONCE = _hold_live_statement(False), _hold_live_statement(True)

# SQLite has no row locks (`FOR UPDATE` is left out) and runs a SELECT outside any transaction:
# there the liveness check takes the database's write lock itself, an UPDATE that changes
# nothing (its title, no key: no foreign key is looked at), and reads the row in the same
# statement (RETURNING). A deletion (a conditional UPDATE)
# then waits for this transaction, and sees its run; or it committed first, and nothing matches.
# (Written out: SQLAlchemy renders a RETURNING clause's columns unqualified, and in the
# subquery an unqualified `id` is the run's own, not the conversation's.)
_HOLD_LIVE_SQLITE = sa.text(
    "UPDATE conversations SET title = title WHERE conversations.id = :conversation_id AND conversations.deleted_at IS NULL "
    "RETURNING conversations.title, (SELECT last.toolsets FROM runs AS last "
    "WHERE last.conversation_id = conversations.id ORDER BY last.id DESC LIMIT 1)"
)


class Held(NamedTuple):
    """A conversation as hold_live locked it: its title now (not as an earlier read in this
    transaction saw it), and the toolsets its latest run was limited to (None: none of its own)."""

    title: str
    toolsets: tuple[str, ...] | None


def hold_live(conversation_id: int) -> Held:
    """Lock the conversation's row until this transaction ends (on SQLite, the database's write
    lock: _HOLD_LIVE_SQLITE), and make sure it is not deleted: a turn queued here and a deletion
    (app.copilot.conversations.delete) take the same lock, so a deletion either sees this turn and
    is refused, or this turn sees the deletion (NotFound).
    Returns, from the same statement, what the row holds under the lock (Held). On the ASGI
    process's loop (extensions.on_loop) the lock is not waited for: WouldWait, nothing kept."""
    statement: sa.Executable = _HOLD_LIVE if on_loop.get() is None else _HOLD_LIVE_AT_ONCE
    if db.session.get_bind().dialect.name == "sqlite":
        statement = _HOLD_LIVE_SQLITE
    live = core(statement, {"conversation_id": conversation_id}).first()  # (WouldWait on the loop: extensions.on_loop)
    if live is None:
        db.session.rollback()
        raise NotFound()
    return Held(live[0], split_toolsets(live[1]))


AGENT_TITLE = "From an agent: "


def start(conversation: Conversation, actor: Actor, text: str, submit: bool = True, claim: bool = False) -> tuple[Message, Run]:
    """The person says something: their message and its queued run are committed together (the
    words are kept whatever happens next), then the pass is handed to a worker. The run reaches
    what both the credential and the conversation's last run reach: a conversation an agent token
    started stays within that token's toolsets, also when the person writes in it.

    `claim`: the caller runs the pass itself at once (the ASGI server's own pass; the `inline`
    runner, which `submit` then runs): when the run would win its claim now (first in its
    conversation's line, no pass running), it is claimed in the message's own transaction — the
    same conditional UPDATE, no commit of its own — and comes back `running`; the caller must
    then run it (execute's `claimed`), or the sweep ends it interrupted. Else it stays queued,
    and is submitted (or not) as `submit` says."""
    held = hold_live(conversation.id)
    # The title as locked: a rename committed since `conversation` was read is kept, never
    # overwritten by the first message's words.
    set_committed_value(conversation, "title", held.title)
    titled = held.title == Conversation.UNTITLED and bool(text.strip())
    if titled:
        # An agent's first words title the conversation as the agent's, never as the person's
        # own ("Approved by IT"): only the person may give it a title of their choosing.
        title = first_title(text)  # one short line; a command's arguments left out
        title = f"{AGENT_TITLE}{title}" if actor.agent else title
        core(_RETITLE, {"conversation_id": conversation.id, "new_title": title})
        set_committed_value(conversation, "title", title)
    toolsets = joined(narrow(actor.toolsets, held.toolsets))
    said, run = message_and_run(conversation.id, text, actor.channel, actor.credential, actor.agent, toolsets)
    inline = submit and jobs.runs_now()
    person = conversation.user if inline else None  # (before the commit: from a claim to its pass, nothing may fail)
    claimed = (claim or inline) and claim_now(run)
    commit_kept()  # (the reply reads the message and the run as written)
    if titled:
        events.retitled(conversation.id, conversation.title)
    if inline and claimed:
        assert person is not None
        jobs.run_claimed(Claimed(run, person))
    elif submit and not claimed:  # (a caller that must note something first submits it itself)
        jobs.submit(run.id)
    return said, run


# The first message titles its conversation (as Core: extensions.core).
_RETITLE = (
    sa.update(Conversation).where(Conversation.id == sa.bindparam("conversation_id")).values(title=sa.bindparam("new_title"))
)


def publish_end(run: Run, step: int, state: str, messages: list[Message]) -> bool:
    """Tell the conversation's streams that this pass ended, how, and which messages it wrote (as
    committed: this process's own streams take words and notices as known, and read a card's
    message back); in the same step, forget its heartbeat and any stop asked for it (a later pass
    of the run starts afresh). False when Redis was away."""
    forget = (alive_key(run.id), stop_key(run.id))
    ids = [m.id for m in messages]
    data: dict[str, Any] = {"run": run.id, "step": step, "state": state, "messages": ids, "answers": answers(run, step)}
    known = None if any(m.approval_id for m in messages) else {"messages": [as_written(m) for m in messages]}
    return events.publish(run.conversation_id, EventType.TURN, forget=forget, known=known, **data) is not None


def answers(run: Run, step: int) -> int | None:
    """The person's message a pass answers (its first), for placing its reply under it."""
    return run.message_id if step == 1 else None


_STEP_APPROVALS = (
    sa.select(Approval)
    .where(Approval.run_id == sa.bindparam("run_id"), Approval.step == sa.bindparam("step"))
    .order_by(Approval.created_at)
)


def step_approvals(run: Run) -> list[Approval]:
    """The cards and forms of the run's current step (the ones its next pass reports)."""
    return list(db.session.scalars(_STEP_APPROVALS, {"run_id": run.id, "step": run.step}))


_RESUME = (  # built once: every answer that completes a step runs it
    sa.update(Run)
    .where(
        Run.id == sa.bindparam("run_id"),
        Run.status == RunStatus.PAUSED,
        ~sa.exists().where(Approval.run_id == Run.id, Approval.step == Run.step, Approval.status.not_in(FINAL)),
    )
    .values(status=RunStatus.QUEUED, next=RunNext.RESULTS, queued_at=sa.bindparam("now"), updated_at=sa.bindparam("now"))
    .returning(Run)
    .execution_options(synchronize_session=False, populate_existing=True)
)


def resume_if_ready(run_id: int) -> Run | None:
    """Once every call of the run's current step is decided, queue its next pass (once): one
    conditional UPDATE … RETURNING of a paused run none of whose current step's cards is still
    open (only one caller anywhere wins), its own commit (each answer's decision committed before
    it: two answers of one step never each miss the other's), then the job."""
    run = db.session.scalars(_RESUME, {"run_id": run_id, "now": utcnow()}).first()
    commit_kept()  # (ends the write either way; what the session holds stays readable as written)
    if run is not None:
        jobs.submit(run.id)
    return run


def newest_message_id(conversation_id: int) -> int:
    """The id of the conversation's newest message (0 for none): what a turn adds comes after it."""
    return db.session.scalar(sa.select(sa.func.max(Message.id)).where(Message.conversation_id == conversation_id)) or 0


def card_message_id(approval: Approval) -> int:
    """The chat line of a card: its run's continuation comes after it."""
    return db.session.scalar(sa.select(sa.func.min(Message.id)).where(Message.approval_id == approval.id)) or 0


def latest_run(conversation_id: int) -> Run | None:
    return db.session.scalar(
        sa.select(Run)
        .where(Run.conversation_id == conversation_id, Run.status != RunStatus.EXTERNAL)
        .order_by(Run.id.desc())
        .limit(1)
    )


def check_own(run: Run, actor: Actor) -> None:
    """Who may retry or stop a run: the person's own credentials any of theirs; an agent
    credential only a run it started itself (`agent`, and `via` that very credential)."""
    if actor.agent and not (run.agent and run.via == actor.credential):
        db.session.rollback()
        raise AgentNotItsTurn()


def retry(conversation: Conversation, actor: Actor) -> Run | None:
    """Queue again the conversation's last run if it failed or was interrupted: the same pass,
    from where it was, as the credential that started it (check_own). A second press finds it
    queued already and queues nothing (None)."""
    hold_live(conversation.id)
    run = latest_run(conversation.id)
    if run is None or run.status not in RETRYABLE:
        db.session.rollback()
        return None
    check_own(run, actor)
    if not won(
        sa.update(Run)
        .where(Run.id == run.id, Run.status.in_(RETRYABLE))
        .values(status=RunStatus.QUEUED, queued_at=utcnow(), channel=actor.channel or run.channel)
    ):
        db.session.rollback()
        return None
    # The failure's note stays, without its Retry button.
    db.session.execute(sa.update(Message).where(Message.run_id == run.id, Message.role == Role.ERROR).values(role=Role.NOTICE))
    db.session.commit()
    jobs.submit(run.id)
    db.session.refresh(run)
    return run


NOT_STOPPED = "Your Stop could not be taken just now (a service is briefly away), and the reply goes on. Please press Stop again."


def stop(conversation: Conversation, actor: Actor) -> Run | None:
    """End the conversation's current pass at its next step (a queued one at once): the run
    that will stop, or None when nothing runs. Refused (check_own) for another's run."""
    run = db.session.scalar(
        sa.select(Run)
        .where(Run.conversation_id == conversation.id, Run.status.in_(GOING))
        .order_by(Run.queued_at, Run.id)
        .limit(1)
    )
    if run is None:
        return None
    check_own(run, actor)
    if run.status == RunStatus.QUEUED and won(
        sa.update(Run).where(Run.id == run.id, Run.status == RunStatus.QUEUED).values(status=RunStatus.STOPPED)
    ):  # it ends as a stopped pass does, with its notice (nothing ran, no words were said)
        notice = Message(conversation_id=conversation.id, role=Role.NOTICE, text=NOTHING_RAN, run_id=run.id, step=run.step + 1)
        db.session.add(notice)
        db.session.commit()
        publish_end(run, run.step + 1, RunStatus.STOPPED, [notice])
        queue_next(conversation.id)
        return run
    db.session.rollback()
    try:
        redis_client.client.set(stop_key(run.id), "1", ex=STOP_FOR)
    except RedisError as error:  # (a running pass reads its stop from Redis: none can be asked without it)
        log.warning("a Stop of run %s refused (503): Redis did not answer (%s)", run.id, error)
        raise ServiceUnavailable(NOT_STOPPED) from None
    return run


def stop_key(run_id: int) -> str:
    return f"stop:{run_id}"


def stop_requested(run_id: int) -> bool:
    try:
        return bool(redis_client.client.exists(stop_key(run_id)))
    except RedisError:
        return False


def alive_key(run_id: int) -> str:
    return f"turn-alive:{run_id}"


def alive_for(every: float) -> int:
    """Seconds a pass's "still here" lasts: a few heartbeats, so one late beat is not a death."""
    return int(every * 3) + 1


def active(conversation_id: int) -> bool:
    """Whether a pass of the conversation is queued or running (the page offers Stop)."""
    return bool(
        db.session.scalar(
            sa.select(sa.func.count()).select_from(Run).where(Run.conversation_id == conversation_id, Run.status.in_(GOING))
        )
    )


def wait(conversation_id: int, run_id: int, cursor: str, seconds: float) -> bool:
    """Wait (at most `seconds`) for the run's pass to end; `cursor` is an event id taken before
    this call. True when it has ended (or was not queued or running)."""
    status = db.session.scalar(sa.select(Run.status).where(Run.id == run_id))
    db.session.rollback()
    if status not in GOING:
        return True
    try:
        return events.wait_for_end(conversation_id, run_id, cursor, seconds) is not None
    except RedisError as error:  # (the turn's events cannot be followed: it is still going, as far as we know)
        log.warning("could not wait for run %s: %s", run_id, error)
        return False
