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


# The answers with a route of their own (…/confirm, …), and the two that make a fresh card.
ANSWERED = (Decision.CONFIRM, Decision.DECLINE, Decision.CANCEL, Decision.SUBMIT)
REVISED = (Decision.EDIT, Decision.REFRESH)


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


class Refusal(StrEnum):
    """Why an attempt on a card was refused: the audit row's detail (outcome `refused_attempt`).
    Three more are made from a card's status: `already_<status>` (it was decided) and
    `refresh_<status>` (a refresh of a decided card), and `countersign_already_<status>`: see the
    static methods."""

    AGENT_CREDENTIAL = "agent_credential"
    BAD_TOKEN = "bad_token"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_FOR_OTHER_APPROVAL = "token_for_other_approval"
    NOT_FOUND = "not_found"
    WRONG_PERSON_OR_SESSION = "wrong_person_or_session"
    OUTSIDE_TOOLSETS = "outside_toolsets"
    EXPIRED = "expired"
    LOST_CLAIM = "lost_claim"
    FORM_NEEDS_CARD = "form_needs_card"
    EDIT_REFUSED = "edit_refused"
    EDIT_NOT_FOUND = "edit_not_found"
    EDIT_NOT_EDITABLE = "edit_not_editable"
    EDIT_FIELD_NOT_EDITABLE = "edit_field_not_editable"
    REFRESH_REFUSED = "refresh_refused"
    REFRESH_NOT_FOUND = "refresh_not_found"
    REFRESH_AGAIN = "refresh_again"
    REVOKE_AGENT_CREDENTIAL = "revoke_agent_credential"
    REVOKE_NOT_ADMIN = "revoke_not_admin"
    REVOKE_NOT_FOUND = "revoke_not_found"
    REVOKE_ALREADY_DECIDED = "revoke_already_decided"
    COUNTERSIGN_AGENT_CREDENTIAL = "countersign_agent_credential"
    COUNTERSIGN_NOT_FOUND = "countersign_not_found"
    COUNTERSIGN_TOKEN_EXPIRED = "countersign_token_expired"
    COUNTERSIGN_EXPIRED = "countersign_expired"
    COUNTERSIGN_WRONG_PERSON_OR_SESSION = "countersign_wrong_person_or_session"
    COUNTERSIGN_OWN_REQUEST = "countersign_own_request"
    COUNTERSIGN_OUTSIDE_TOOLSETS = "countersign_outside_toolsets"
    COUNTERSIGN_NOT_ALLOWED = "countersign_not_allowed"
    COUNTERSIGN_NOT_NEEDED = "countersign_not_needed"
    COUNTERSIGN_NOT_CONFIRMED = "countersign_not_confirmed"
    COUNTERSIGNED_CARD_BY_CHANNEL = "countersigned_card_by_channel"

    @staticmethod
    def already(status: str) -> str:
        """An answer to a card already decided (`already_done`, …)."""
        return f"already_{status}"

    @staticmethod
    def countersign_already(status: str) -> str:
        """A countersignature of a card already decided (`countersign_already_done`, …)."""
        return f"countersign_already_{status}"

    @staticmethod
    def refresh(status: str) -> str:
        """A refresh of a card no longer waiting (`refresh_declined`, …)."""
        return f"refresh_{status}"


class CardsTo(StrEnum):
    """Which cards reach a person's linked chat account outside a thread (app.connectors.push):
    those an agent asked for (over MCP, or with an agent token), all of them, or none."""

    AGENTS = "agents"
    ALL = "all"
    OFF = "off"
