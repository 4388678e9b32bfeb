"""The rows a turn writes, as Core (extensions.core: a third of the CPU of the ORM's flush of the
same rows): the person's message and its queued run, a pass's messages; and a copy of a message as
written, for whoever reads it outside its session."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from app.extensions import core, db
from app.models import Message, Run, utcnow
from app.status import Role, RunNext, RunStatus

_WRITE_MESSAGES = sa.insert(Message).returning(Message.id, sort_by_parameter_order=True)
_WRITE_RUN = sa.insert(Run).returning(Run.id)


def message_and_run(
    conversation_id: int, text: str, channel: str, via: str, agent: bool, toolsets: str | None
) -> tuple[Message, Run]:
    """The person's message and its queued run, INSERTed (not yet committed), the session's own
    rows from now on: every column as written (nothing read back), the run's message loaded."""
    now = utcnow()
    said = Message(conversation_id=conversation_id, role=Role.USER, text=text, approval_id=None)
    write_messages([said], None, None, now)  # (its run, step and date set as written)
    run = Run(
        conversation_id=conversation_id,
        status=RunStatus.QUEUED,
        next=RunNext.PROMPT,
        message_id=said.id,
        channel=channel,
        queued_at=now,
        history="[]",
        step=0,
        error=None,
        requests=0,
        input_tokens=0,
        output_tokens=0,
        duration_ms=0,
        via=via,
        agent=agent,
        toolsets=toolsets,
        created_at=now,
        updated_at=now,
    )
    run.id = core(_WRITE_RUN, columns(run)).scalar_one()
    for row in (said, run):
        make_transient_to_detached(row)  # (as if read: what was set is its committed state)
        db.session.add(row)
    set_committed_value(run, "message", said)
    return said, run


def write_messages(messages: list[Message], run_id: int | None, step: int | None, now: Any = None) -> None:
    """INSERT these new messages, in their order, in one statement: each gets its id, and the run,
    step and date it is written with. They stay out of the session (its next rollback leaves them be)."""
    if not messages:
        return
    now = now or utcnow()
    for message in messages:
        message.run_id, message.step, message.created_at = run_id, step, now
        message.text = message.text or ""
    written = core(_WRITE_MESSAGES, [columns(m) for m in messages]).scalars()
    for message, row_id in zip(messages, written, strict=True):
        message.id = row_id


def columns(row: Message | Run) -> dict[str, Any]:
    """A new row's column values as set on it (its id left to the database)."""
    return {c.key: getattr(row, c.key) for c in type(row).__mapper__.column_attrs if c.key != "id"}


def as_written(message: Message) -> Message:
    """A copy of a message just committed that no session holds: its values stay readable
    wherever it goes (its own session's next rollback expires the original)."""
    return Message(**{c.key: getattr(message, c.key) for c in Message.__mapper__.column_attrs})
