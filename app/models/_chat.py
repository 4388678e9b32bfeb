"""Conversations, their messages, the runs (agent turns) and the approvals they wait on."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.models._base import Model, UTCDateTime, new_id, utcnow
from app.models._people import User
from app.status import ApprovalType, Role, RunNext, RunStatus, Status


class Conversation(Model):
    """A person's chat. Deleting one sets `deleted_at` (its approvals and the audit log still name
    it); a deleted conversation is found by nobody's routes (app.copilot.conversations)."""

    __tablename__ = "conversations"
    __table_args__ = (
        sa.Index("ix_conversations_user_deleted", "user_id", "deleted_at"),
        # One conversation per person and channel key (NULLs differ; deleting one clears its key).
        sa.UniqueConstraint("user_id", "channel_key", name="uq_conversations_user_channel_key"),
    )
    UNTITLED: ClassVar[str] = "New conversation"  # a title nobody gave: the first message names it

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    title: Mapped[str] = mapped_column(sa.String(200), default=UNTITLED)
    # Set for a conversation a channel makes for its own calls ("mcp"): how it is found again. The
    # title is the person's to change and never says where calls land.
    channel_key: Mapped[str | None] = mapped_column(sa.String(80))
    # The model's memory after the last finished turn (pydantic-ai messages JSON). It grows with
    # the conversation: loaded only where it is read (a turn's pass), not with every request's row.
    history: Mapped[str] = mapped_column(sa.Text, default="[]", deferred=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship()


class Message(Model):
    """A line of the chat as the person sees it; a card is a message with an approval."""

    __tablename__ = "messages"
    __table_args__ = (sa.CheckConstraint(sa.column("role").in_([r.value for r in Role]), name="ck_messages_role"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"), index=True)
    role: Mapped[str] = mapped_column(sa.String(20))  # a Role
    text: Mapped[str] = mapped_column(sa.Text, default="")
    approval_id: Mapped[str | None] = mapped_column(sa.ForeignKey("approvals.id"))
    # The run and pass (its step when the pass began) that wrote it; NULL for the person's words.
    run_id: Mapped[int | None] = mapped_column(index=True)
    step: Mapped[int | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    approval: Mapped[Approval | None] = relationship()


class Run(Model):
    """An agent turn, run by a worker in passes: queued, running, paused on its cards, or ended
    (done, failed, stopped, interrupted; `external` for an MCP client's own call)."""

    __tablename__ = "runs"
    __table_args__ = (
        sa.Index("ix_runs_conversation_status", "conversation_id", "status"),
        # The sweeps' look for passes gone silent and for runs left queued (every worker, every
        # TURN_HEARTBEAT): the runs in one state, not every run ever kept. (Not a partial index:
        # naming PostgreSQL's `where` here would load its dialect in every process, SQLite's too.)
        sa.Index("ix_runs_status_updated", "status", "updated_at"),
        sa.CheckConstraint(sa.column("status").in_([s.value for s in RunStatus]), name="ck_runs_status"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"), index=True)
    status: Mapped[str] = mapped_column(sa.String(20), default=RunStatus.QUEUED)
    # What the next pass feeds the model: the person's message (`prompt`, message_id), the answers
    # to its cards (`results`), or the history the conversation reached (`continue`).
    next: Mapped[str] = mapped_column(sa.String(10), default=RunNext.PROMPT, server_default=RunNext.PROMPT.value)
    message_id: Mapped[int | None] = mapped_column()
    channel: Mapped[str] = mapped_column(sa.String(40), default="", server_default="")
    # Passes of one conversation run one at a time, in the order they were queued.
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    history: Mapped[str] = mapped_column(sa.Text, default="[]", deferred=True)  # (kept, not read by a pass)
    step: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(sa.Text)
    # What the turn cost: model requests, tokens and our wall time (model included).
    requests: Mapped[int] = mapped_column(default=0)
    input_tokens: Mapped[int] = mapped_column(default=0)
    output_tokens: Mapped[int] = mapped_column(default=0)
    duration_ms: Mapped[int] = mapped_column(default=0)
    # The credential whose call started the run ("web", "api:pat:3", "mcp:pat:3", "telegram", …),
    # whether it acts for an agent, and the toolsets the run reaches (NULL: the app's). A resume
    # after someone's answer keeps them: the run never reaches more than what started it.
    via: Mapped[str] = mapped_column(sa.String(80), default="", server_default="")
    agent: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    toolsets: Mapped[str | None] = mapped_column(sa.String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    conversation: Mapped[Conversation] = relationship()
    # The person's message the run answers (message_id, no constraint of its own): given with a new
    # run, the message is written first and its id set on the run in the same flush.
    message: Mapped[Message | None] = relationship(primaryjoin="foreign(Run.message_id) == Message.id")


class Approval(Model):
    """A card (or form) waiting for its person. `arguments` never leaves the server."""

    __tablename__ = "approvals"
    __table_args__ = (
        sa.Index("ix_approvals_tenant_status_created", "tenant_id", "status", "created_at", "id"),
        sa.Index("ix_approvals_tenant_created", "tenant_id", "created_at", "id"),
        sa.Index("ix_approvals_tenant_decided", "tenant_id", "decided_at"),
        # The cards past their time, looked for at every conversation's page and the cron sweep
        # (and the claims that died, by status): without it, every card ever kept was read.
        sa.Index("ix_approvals_status_expires", "status", "expires_at"),
        # The cards of calls still open when the person writes again (turns._history.answers_for).
        sa.Index("ix_approvals_conversation_call", "conversation_id", "tool_call_id"),
        sa.CheckConstraint(sa.column("status").in_([s.value for s in Status]), name="ck_approvals_status"),
        sa.CheckConstraint(sa.column("type").in_([t.value for t in ApprovalType]), name="ck_approvals_type"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id"), index=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"))
    tool_call_id: Mapped[str] = mapped_column(sa.String(200))
    step: Mapped[int] = mapped_column(default=0)
    action: Mapped[str] = mapped_column(sa.String(100))
    type: Mapped[str] = mapped_column(sa.String(10), default=ApprovalType.CONFIRM)
    arguments: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    reason: Mapped[str] = mapped_column(sa.Text)
    rows: Mapped[list[dict[str, str]]] = mapped_column(sa.JSON, default=list)
    digest: Mapped[str] = mapped_column(sa.String(64))
    # For a form: the MCP elicitation object the person was shown (never their answers).
    form: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    status: Mapped[str] = mapped_column(sa.String(20), default=Status.PENDING)
    result: Mapped[str | None] = mapped_column(sa.Text)
    filled: Mapped[list[str] | None] = mapped_column(sa.JSON)  # a submitted form's field names (never values)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id"))
    # The credential whose call asked for this card (its run's `via`), and whether it acts for an
    # agent: shown to the person; an agent credential never answers any card.
    requested_via: Mapped[str] = mapped_column(sa.String(80), default="", server_default="")
    requested_by_agent: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    # The second signature (issue 16). `feedback`: the person's words with a decline, meant for the
    # model. `replaces`: the card this one was made from (an edit, or a fresh card after a change);
    # `edited`: the names of the fields the person changed (never their values). `changes`: the rows
    # that differed when a confirmed card was rebuilt ([{label, before, after}]). `countersign`: who
    # must give the second signature (None: one is enough); `confirmed_by`/`confirmed_at`: the first.
    feedback: Mapped[str | None] = mapped_column(sa.Text)
    replaces: Mapped[str | None] = mapped_column(sa.String(32))
    edited: Mapped[list[str] | None] = mapped_column(sa.JSON)
    changes: Mapped[list[dict[str, str]] | None] = mapped_column(sa.JSON)
    countersign: Mapped[str | None] = mapped_column(sa.String(100))
    confirmed_by: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id"))
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Where the card was sent outside its page and thread (a person's linked chat): [{connector,
    # chat, message}], so that its outcome is shown there too, whoever decides it.
    posted: Mapped[list[dict[str, str]] | None] = mapped_column(sa.JSON)

    user: Mapped[User] = relationship(foreign_keys=[user_id])
