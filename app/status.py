"""What an approval can be, and what each outcome says on every channel: the one vocabulary.

The card, a chat thread, the model and the admin console each read their line from OUTCOMES;
nothing else spells a status. (A bottom-layer module like errors.py: the tables' CHECK reads it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from app.errors import PartlyDone


class Status(StrEnum):
    """An approval's status. `pending` waits for its person; `countersigning` was confirmed by its
    person and waits for a second, different person's signature (an action's `countersign`);
    `running` is claimed and handle() is running; every other status is final and runs nothing more."""

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

    @property
    def final(self) -> bool:
        return self not in (Status.PENDING, Status.COUNTERSIGNING, Status.RUNNING)


FINAL = frozenset(s for s in Status if s.final)


@dataclass(frozen=True)
class Outcome:
    """What one status says: on the card, in a chat thread, to the model, and its colour on the
    admin console's chart. `done` and `failed` add the action's own words (see the functions)."""

    card: str
    chat: str
    model: str
    colour: str


OUTCOMES: dict[Status, Outcome] = {
    Status.PENDING: Outcome("Expired", "", "", "#2563eb"),  # shown only when past its time, unswept
    Status.RUNNING: Outcome("Running…", "Running…", "", "#0e7490"),
    Status.DONE: Outcome("Done", "Done.", "Done.", "#1f7a4d"),
    Status.DECLINED: Outcome(
        "Declined · declined", "Declined — nothing was done.", "The person declined. Nothing was done.", "#5d6675"
    ),
    Status.CANCELLED: Outcome(
        "Set aside — nothing ran",
        "Set aside — nothing was done.",
        "The person set this aside for now (Not now). Nothing was done; do not ask again unless they do.",
        "#64748b",
    ),
    Status.CHANGED: Outcome(
        "Changed — nothing ran",
        "Changed since you were asked — nothing was done.",
        "The card changed before the person confirmed (the record is not what it was), "
        "so nothing ran. Ask again if it is still wanted.",
        "#7a4cc2",
    ),
    Status.REFUSED: Outcome(
        "Refused — nothing ran",
        "Not allowed any more — nothing was done.",
        "Refused at confirmation: the person may no longer do this. Nothing ran.",
        "#b42318",
    ),
    Status.EXPIRED: Outcome(
        "Expired", "Expired — nothing was done.", "The card expired before the person answered. Nothing was done.", "#9a6700"
    ),
    Status.REVOKED: Outcome(
        "Revoked by an admin",
        "Revoked by an admin — nothing was done.",
        "An admin revoked this request. Nothing was done.",
        "#c2410c",
    ),
    Status.FAILED: Outcome("Failed", "It failed — nothing else was done.", "Failed.", "#991b1b"),
    Status.INTERRUPTED: Outcome(
        "Interrupted — not run again",
        "Interrupted while it ran — it will not be run again; check the result before asking again.",
        "Interrupted: the server stopped while this ran. It will not be retried; check the result before asking again.",
        "#334155",
    ),
    Status.SUPERSEDED: Outcome(
        "Superseded by a newer card — nothing ran",
        "Replaced by a newer request — nothing was done.",
        "A newer request replaced this one before the person answered. Nothing was done.",
        "#94a3b8",
    ),
    Status.COUNTERSIGNING: Outcome(
        "Confirmed — waiting for a countersignature",
        "Confirmed — it waits for a second person's countersignature before it runs.",
        "",
        "#0f766e",
    ),
    Status.EDITED: Outcome(
        "Edited — replaced by a fresh card",
        "Edited — a fresh card replaced this one; nothing was done.",
        "The person edited this request; a fresh card replaced it. Nothing ran from this one.",
        "#6d28d9",
    ),
}


# The model's line for a card whose second signer declined it (after its person confirmed).
SECOND_DECLINED = "The person confirmed it, but the second signer asked to countersign declined. Nothing was done."


class Decided(Protocol):
    """What the lines below read of an approval."""

    status: str
    type: str
    result: str | None


def card_line(approval: Decided, done_label: str = "Done") -> str:
    """The card's outcome row; `done_label` is the action's own word for having run."""
    status = Status(approval.status)
    if status is Status.DONE:
        return "Submitted · done" if approval.type == "form" else f"{done_label} · done"
    if status is Status.FAILED:
        return f"Failed — {approval.result or 'the action raised an error'}"
    return OUTCOMES[status].card


def chat_line(approval: Decided) -> str:
    """The line a chat thread is told once the card is decided."""
    status = Status(approval.status)
    if status is Status.DONE:
        return approval.result or OUTCOMES[status].chat
    return OUTCOMES[status].chat


def model_line(approval: Decided) -> str:
    """The line the model reads for a decided approval."""
    status = Status(approval.status)
    if status is Status.DONE:
        return (approval.result or "Done.") if approval.type == "form" else f"Done. {approval.result or ''}".strip()
    if status is Status.FAILED:
        result = approval.result or "the action raised an error"
        if result.startswith(PartlyDone.prefix):  # it says itself what was and was not done
            return f"Failed. {result}"
        return f"Failed: {result}. Nothing else was done."
    return OUTCOMES[status].model


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
