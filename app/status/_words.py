"""The words the database and every channel share: each a StrEnum, spelt here and nowhere else."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """An approval's status. `pending` waits for its person; `countersigning` was confirmed by its
    person and waits for a second, different person's signature (an action's `countersign`);
    `running` is claimed and handle() is running; every other status is final and runs nothing more.
    `queued`: handle() ran and handed its work to a queue (an action of `Delivery.QUEUED`); it is
    decided, and moves once more, to `done` or `failed`, when the delivery ends."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    CHANGED = "changed"
    REFUSED = "refused"
    EXPIRED = "expired"
    REVOKED = "revoked"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SUPERSEDED = "superseded"
    COUNTERSIGNING = "countersigning"
    EDITED = "edited"
    QUEUED = "queued"

    @property
    def final(self) -> bool:
        return self not in (Status.PENDING, Status.COUNTERSIGNING, Status.RUNNING)


FINAL = frozenset(s for s in Status if s.final)


class Delivery(StrEnum):
    """When an action's work is over (its one declaration, `delivery = Delivery.QUEUED`): `now`,
    when handle() returns; `queued`, when the queue handle() handed it to delivers it — the
    action's deliver() says how it went, and the card reads Queued, then Sent or Failed to send."""

    NOW = "now"
    QUEUED = "queued"

    @property
    def failed_label(self) -> str:
        """The card's word for a failure of this action."""
        return "Failed to send" if self is Delivery.QUEUED else "Failed"


class RunStatus(StrEnum):
    """A run's status: `queued` for a worker, `running` a pass, `paused` on its cards, `external`
    an MCP client's own call; the rest ended (Retry takes up a failed or interrupted one)."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    EXTERNAL = "external"


GOING = (RunStatus.QUEUED, RunStatus.RUNNING)  # a pass is waiting or under way
RETRYABLE = (RunStatus.FAILED, RunStatus.INTERRUPTED)
# A pass ends as one of these (its events' last one says which).
PASS_ENDS = (RunStatus.DONE, RunStatus.PAUSED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.INTERRUPTED)


class Role(StrEnum):
    """Who a line of the chat is from (`messages.role`): the person, the model, Countersign's own
    notice or error, or a card (the line holding an approval)."""

    USER = "user"
    ASSISTANT = "assistant"
    NOTICE = "notice"
    ERROR = "error"
    CARD = "card"


class ApprovalType(StrEnum):
    """What an approval asks (`approvals.type`): a yes or no on a card, or a form's missing fields."""

    CONFIRM = "confirm"
    FORM = "form"


class RunNext(StrEnum):
    """What a run's next pass feeds the model (`runs.next`): the person's message, the answers to
    its cards, or the history the conversation reached."""

    PROMPT = "prompt"
    RESULTS = "results"
    CONTINUE = "continue"


class Decision(StrEnum):
    """Every answer a card or form can get, by whoever gives it (the routes' verbs are these)."""

    CONFIRM = "confirm"
    DECLINE = "decline"
    CANCEL = "cancel"
    SUBMIT = "submit"
    EDIT = "edit"
    REFRESH = "refresh"
    COUNTERSIGN = "countersign"
    COUNTERSIGN_DECLINE = "countersign_decline"
    REVOKE = "revoke"
    EXPIRE = "expire"


class EventType(StrEnum):
    """An entry of a conversation's live stream (its SSE event name)."""

    TEXT = "text"
    TURN = "turn"
    APPROVAL = "approval"
    TITLE = "title"


class TurnState(StrEnum):
    """A `turn` event's state: a pass started, or ended as one of PASS_ENDS."""

    STARTED = "started"
    DONE = "done"
    PAUSED = "paused"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
