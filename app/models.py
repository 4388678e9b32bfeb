"""The tables: tenants and people, the demo's posts and outbox, conversations,
runs, approvals and the audit log."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from flask_login import UserMixin
from sqlalchemy.orm import Mapped, mapped_column, relationship
from werkzeug.security import check_password_hash

from app.extensions import Base, db
from app.status import RunStatus, Status

if TYPE_CHECKING:
    Model = Base  # what db.Model is, in a form type checkers follow
else:
    Model = db.Model


ROW_ID_MAX = 2**31 - 1  # the largest INTEGER primary key (and sequence number) the tables hold


def utcnow() -> datetime:
    """Now, in UTC, timezone-aware (what every timestamp column holds)."""
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator):
    """A DateTime that always comes back timezone-aware in UTC (SQLite drops tzinfo)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


def new_id() -> str:
    """An unguessable id; an approval's id doubles as its idempotency key."""
    return secrets.token_hex(16)


class Tenant(Model):
    __tablename__ = "tenants"
    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(sa.String(64), unique=True)
    name: Mapped[str] = mapped_column(sa.String(200))


class User(UserMixin, Model):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    email: Mapped[str] = mapped_column(sa.String(320), unique=True)
    name: Mapped[str] = mapped_column(sa.String(200), default="")
    password_hash: Mapped[str] = mapped_column(sa.String(256), default="")
    is_admin: Mapped[bool] = mapped_column(default=False)

    tenant: Mapped[Tenant] = relationship()

    def check_password(self, password: str) -> bool:
        return bool(self.password_hash) and check_password_hash(self.password_hash, password)


class ApiToken(Model):
    """A personal access token; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(200), default="")
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    # The toolsets this token reaches on every route, API chat and MCP ("" = the app's COUNTERSIGN_TOOLSETS).
    toolsets: Mapped[str] = mapped_column(sa.String(500), default="", server_default="")
    # "agent" (the default: chats and calls actions, never answers a card or a form, never sees a
    # card's token) or "client" (the person's own app: may answer, like the browser).
    scope: Mapped[str] = mapped_column(sa.String(10), default="agent", server_default="agent")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked: Mapped[bool] = mapped_column(default=False)

    user: Mapped[User] = relationship()

    @property
    def is_agent(self) -> bool:
        """Anything but an explicit client token acts for an agent (fail closed)."""
        return self.scope != "client"


class UserSession(Model):
    """A browser sign-in. The cookie's `sid` is this row's id (and card tokens' "web:<sid>"
    binding); a cookie counts only while its row is live, so signing out ends it everywhere."""

    __tablename__ = "user_sessions"
    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Post(Model):
    __tablename__ = "posts"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    author_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    title: Mapped[str] = mapped_column(sa.String(300))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    status: Mapped[str] = mapped_column(sa.String(20), default="draft")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    author: Mapped[User] = relationship()


class OutboxEmail(Model):
    """An email the send_email action queued; the approval id makes sending idempotent."""

    __tablename__ = "outbox"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    sender_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    to: Mapped[str] = mapped_column(sa.String(320))
    subject: Mapped[str] = mapped_column(sa.String(300))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    status: Mapped[str] = mapped_column(sa.String(20), default="queued")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Conversation(Model):
    """A person's chat. Deleting one sets `deleted_at` (its approvals and the audit log still name
    it); a deleted conversation is found by nobody's routes (app.copilot.conversations)."""

    __tablename__ = "conversations"
    __table_args__ = (sa.Index("ix_conversations_user_deleted", "user_id", "deleted_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    title: Mapped[str] = mapped_column(sa.String(200), default="New conversation")
    # The model's memory after the last finished turn (pydantic-ai messages JSON). It grows with
    # the conversation: loaded only where it is read (a turn's pass), not with every request's row.
    history: Mapped[str] = mapped_column(sa.Text, default="[]", deferred=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship()


class Message(Model):
    """A line of the chat as the person sees it; a card is a message with an approval."""

    __tablename__ = "messages"
    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"), index=True)
    role: Mapped[str] = mapped_column(sa.String(20))  # user | assistant | notice | error | card
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
    __table_args__ = (sa.Index("ix_runs_conversation_status", "conversation_id", "status"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"), index=True)
    status: Mapped[str] = mapped_column(sa.String(20), default=RunStatus.QUEUED)
    # What the next pass feeds the model: the person's message (`prompt`, message_id), the answers
    # to its cards (`results`), or the history the conversation reached (`continue`).
    next: Mapped[str] = mapped_column(sa.String(10), default="prompt", server_default="prompt")
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
        sa.CheckConstraint(sa.column("status").in_([s.value for s in Status]), name="ck_approvals_status"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[int] = mapped_column(sa.ForeignKey("tenants.id"))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id"), index=True)
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"))
    tool_call_id: Mapped[str] = mapped_column(sa.String(200))
    step: Mapped[int] = mapped_column(default=0)
    action: Mapped[str] = mapped_column(sa.String(100))
    type: Mapped[str] = mapped_column(sa.String(10), default="confirm")  # confirm | form
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

    user: Mapped[User] = relationship(foreign_keys=[user_id])


class AuditEvent(Model):
    """One decision or refused attempt. Never holds a form value or a secret.
    Rows chain per tenant: `hash` is an HMAC, with the audit key named by `key_id`, over the
    previous row's hash and this row's content (app/copilot/audit.py)."""

    __tablename__ = "audit_events"
    __table_args__ = (sa.UniqueConstraint("chain", "seq", name="uq_audit_events_chain_seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    chain: Mapped[int] = mapped_column(default=0)  # the tenant's id, 0 for none
    seq: Mapped[int] = mapped_column(default=0)
    prev_hash: Mapped[str] = mapped_column(sa.String(64), default="")
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")  # which audit key made `hash`
    tenant_id: Mapped[int | None] = mapped_column(sa.ForeignKey("tenants.id"), index=True)
    user_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id"))
    approval_id: Mapped[str | None] = mapped_column(sa.String(32), index=True)
    event: Mapped[str] = mapped_column(sa.String(40))  # e.g. approval.created, approval.confirm
    outcome: Mapped[str] = mapped_column(sa.String(40))  # done, declined, refused_attempt, ...
    detail: Mapped[str] = mapped_column(sa.Text, default="")
    channel: Mapped[str] = mapped_column(sa.String(40), default="")  # web, api, cli
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditHead(Model):
    """The last link of each tenant's audit chain; updating it first serializes writers.
    `mac` (keyed) covers chain, seq and hash, so the head cannot be moved to a point of one's choosing."""

    __tablename__ = "audit_heads"
    chain: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(default=0)
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")
    mac: Mapped[str] = mapped_column(sa.String(64), default="")


class AuditMark(Model):
    """How far a chain was last verified (seq, hash) and where the round of re-checking older rows
    stands (`swept`), keyed like the head, so the admin page verifies only what is new."""

    __tablename__ = "audit_marks"
    chain: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(default=0)
    hash: Mapped[str] = mapped_column(sa.String(64), default="")
    swept: Mapped[int] = mapped_column(default=0)
    key_id: Mapped[str] = mapped_column(sa.String(16), default="")
    mac: Mapped[str] = mapped_column(sa.String(64), default="")


class ConnectorIdentity(Model):
    """A person's identity on a chat connector (a Slack or Telegram user id, an email address)."""

    __tablename__ = "connector_identities"
    __table_args__ = (sa.UniqueConstraint("connector", "external_id", name="uq_connector_identities_external"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    external_id: Mapped[str] = mapped_column(sa.String(320))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"), index=True)

    user: Mapped[User] = relationship()


class ConnectorThread(Model):
    """A chat thread's conversation, per person; `address` is where replies go (email)."""

    __tablename__ = "connector_threads"
    __table_args__ = (sa.UniqueConstraint("connector", "thread_key", "user_id", name="uq_connector_threads_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    connector: Mapped[str] = mapped_column(sa.String(20))
    thread_key: Mapped[str] = mapped_column(sa.String(500))
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    conversation_id: Mapped[int] = mapped_column(sa.ForeignKey("conversations.id"))
    address: Mapped[str] = mapped_column(sa.String(320), default="")
    subject: Mapped[str] = mapped_column(sa.String(300), default="")


class ProbeRow(Model):
    """The one-INSERT endpoint's table, used only by bench/ as a baseline."""

    __tablename__ = "probe_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
