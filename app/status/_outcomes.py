"""What each outcome of an approval says on every channel: the card's label, the chat's line, the
model's line, who decided it; nothing else words an outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.errors import PartlyDone
from app.status._words import Delivery, Status


@dataclass(frozen=True)
class Outcome:
    """What one status says: the card's label (beside it, the status as a badge), the line in a
    chat thread, the model's line, its colour on the admin console's chart, and who decided it
    (`{who}`: "you", or a person's email; `{when}`: the time). `done`, `failed` and `queued` add
    the action's own words (see the functions). `pressed` answers a press on a card decided
    elsewhere: who decided it (`{who}`) and how, `{at}` the time (app/copilot/decided.py)."""

    card: str
    chat: str
    model: str
    colour: str
    by: str = "decided by {who}, {when}"
    pressed: str = ""


CONFIRMER = "confirmed by {who}"  # a countersigned card's first signature, before its decider
CONFIRMED_BY = f"{CONFIRMER}, {{when}}"
SUBMITTED_BY = "submitted by {who}, {when}"  # a form's Done: its person submitted it

OUTCOMES: dict[Status, Outcome] = {
    Status.PENDING: Outcome("Expired", "", "", "#2563eb", ""),  # shown only when past its time, unswept
    Status.RUNNING: Outcome(
        "Running…", "Running…", "", "#0e7490", "", pressed="{who} confirmed this card{at}; it is running now. It runs only once."
    ),
    Status.DONE: Outcome(
        "Done",
        "Done.",
        "Done.",
        "#1f7a4d",
        CONFIRMED_BY,
        pressed="{who} confirmed this card{at}; it ran once. Nothing ran again.",
    ),
    Status.DECLINED: Outcome(
        "Declined",
        "Declined — nothing was done.",
        "The person declined. Nothing was done.",
        "#5d6675",
        "declined by {who}, {when}",
        pressed="{who} declined this card{at}. Nothing ran.",
    ),
    Status.CANCELLED: Outcome(
        "Set aside — nothing ran",
        "Set aside — nothing was done.",
        "The person set this aside for now (Not now). Nothing was done; do not ask again unless they do.",
        "#64748b",
        "set aside by {who}, {when}",
        pressed="{who} set this card aside{at}. Nothing ran.",
    ),
    Status.CHANGED: Outcome(
        "Changed — nothing ran",
        "Changed since you were asked — nothing was done.",
        "The card changed before the person confirmed (the record is not what it was), "
        "so nothing ran. Ask again if it is still wanted.",
        "#7a4cc2",
        CONFIRMED_BY,
        pressed="{who} confirmed this card{at}, but the record had changed, so nothing ran.",
    ),
    Status.REFUSED: Outcome(
        "Refused — nothing ran",
        "Not allowed any more — nothing was done.",
        "Refused at confirmation: the person may no longer do this. Nothing ran.",
        "#b42318",
        CONFIRMED_BY,
        pressed="{who} confirmed this card{at}, but it was no longer allowed, so nothing ran.",
    ),
    Status.EXPIRED: Outcome(
        "Expired",
        "Expired — nothing was done.",
        "The card expired before the person answered. Nothing was done.",
        "#9a6700",
        "ended by the expiry, {when}",
        pressed="This card expired{at}. Nothing ran.",
    ),
    Status.REVOKED: Outcome(
        "Revoked",
        "Revoked by an admin — nothing was done.",
        "An admin revoked this request. Nothing was done.",
        "#c2410c",
        "revoked by {who}, {when}",
        pressed="{who} revoked this card{at}. Nothing ran.",
    ),
    Status.FAILED: Outcome(
        "Failed",
        "It failed — nothing else was done.",
        "Failed.",
        "#991b1b",
        CONFIRMED_BY,
        pressed="{who} confirmed this card{at}; it failed. Nothing ran again.",
    ),
    Status.INTERRUPTED: Outcome(
        "Interrupted — not run again",
        "Interrupted while it ran — it will not be run again; check the result before asking again.",
        "Interrupted: the server stopped while this ran. It will not be retried; check the result before asking again.",
        "#334155",
        CONFIRMED_BY,
        pressed="This card was interrupted{at} while it ran; it will not run again.",
    ),
    Status.SUPERSEDED: Outcome(
        "Superseded by a newer card — nothing ran",
        "Replaced by a newer request — nothing was done.",
        "A newer request replaced this one before the person answered. Nothing was done.",
        "#94a3b8",
        "replaced by a newer request, {when}",
        pressed="A newer card took this card's place{at}. Nothing ran.",
    ),
    Status.COUNTERSIGNING: Outcome(
        "Confirmed — waiting for a countersignature",
        "Confirmed — it waits for a second person's countersignature before it runs.",
        "",
        "#0f766e",
        "",
        pressed="{who} confirmed this card{at}; it waits for a countersignature. Nothing ran yet.",
    ),
    Status.EDITED: Outcome(
        "Edited — replaced by a fresh card",
        "Edited — a fresh card replaced this one; nothing was done.",
        "The person edited this request; a fresh card replaced it. Nothing ran from this one.",
        "#6d28d9",
        "edited by {who}, {when}",
        pressed="{who} edited this card{at}: a fresh card took its place. Nothing ran.",
    ),
    Status.QUEUED: Outcome(
        "Queued",
        "Queued — it has not gone out yet.",
        "Queued: handed over for delivery, which has not happened yet; its outcome comes when delivery ends.",
        "#0369a1",
        CONFIRMED_BY,
        pressed="{who} confirmed this card{at}; it ran once and its work is queued for delivery. Nothing ran again.",
    ),
}
# A press on a card that needed two signatures names both (OUTCOMES[…].pressed, reworded).
TWO_SIGNATURES = {
    "{who} confirmed this card": "{first} confirmed this card and {who} countersigned it",
    "{who} declined this card": "{first} confirmed this card and {who} declined the countersignature",
}
# A press on a submitted form says so (OUTCOMES[Status.DONE].pressed, reworded).
FORM_SUBMITTED = ("{who} confirmed this card", "{who} submitted this form")
NO_ONE = (Status.EXPIRED, Status.SUPERSEDED, Status.INTERRUPTED)  # ended by the app itself: no {who}
# A countersigned card's second signature, after "confirmed by" its person.
COUNTERSIGNED_BY = "countersigned by {who}, {when}"
RAN = frozenset({Status.DONE, Status.QUEUED, Status.FAILED, Status.CHANGED, Status.REFUSED, Status.INTERRUPTED})

# The model's line for a card whose second signer declined it (after its person confirmed).
SECOND_DECLINED = "The person confirmed it, but the second person, asked to countersign it, declined. Nothing was done."


class Decided(Protocol):
    """What the lines below read of an approval."""

    status: str
    type: str
    result: str | None


@dataclass(frozen=True)
class Words:
    """An action's own words for its outcomes: its word for having run, and how its work ends."""

    done_label: str = "Done"
    delivery: Delivery = Delivery.NOW


def badge(approval: Decided) -> Status:
    """The status the card's badge shows (a card past its time, not yet swept, is expired)."""
    status = Status(approval.status)
    return Status.EXPIRED if status is Status.PENDING else status


def card_line(approval: Decided, words: Words = Words()) -> str:
    """The card's outcome label (the status stands beside it, as a badge, never in it)."""
    status = Status(approval.status)
    if status is Status.DONE and approval.type == "form":
        return f"Submitted — filled in: {', '.join(getattr(approval, 'filled', None) or [])}"
    if status is Status.DONE:
        return words.done_label
    if status is Status.FAILED:
        return f"{words.delivery.failed_label} — {approval.result or 'the action raised an error'}"
    return OUTCOMES[status].card


def chat_line(approval: Decided, words: Words = Words()) -> str:
    """The line a chat thread is told once the card is decided."""
    status = Status(approval.status)
    if status is Status.DONE:
        return approval.result or OUTCOMES[status].chat
    if status is Status.FAILED and words.delivery is Delivery.QUEUED:
        return f"{card_line(approval, words)}. Nothing else was done."
    return OUTCOMES[status].chat


def model_line(approval: Decided, words: Words = Words()) -> str:
    """The line the model reads for a decided approval."""
    status = Status(approval.status)
    if status is Status.DONE:
        return (approval.result or "Done.") if approval.type == "form" else f"Done. {approval.result or ''}".strip()
    if status is Status.QUEUED:
        return f"{OUTCOMES[status].model} {approval.result or ''}".strip()
    if status is Status.FAILED:
        result = approval.result or "the action raised an error"
        if result.startswith(PartlyDone.prefix):  # it says itself what was and was not done
            return f"Failed. {result}"
        return f"{words.delivery.failed_label}: {result}. Nothing else was done."
    return OUTCOMES[status].model


def decided_line(status: Status, who: str, when: str, confirmer: str | None = None, form: bool = False) -> str:
    """Who decided a card and when: "Declined by you, …", "Ended by the expiry, …", a form's
    "Submitted by you, …", and for a countersigned card "Confirmed by you; countersigned by …"
    (empty while it is undecided)."""
    template = SUBMITTED_BY if form and status is Status.DONE else OUTCOMES[status].by
    if not template:
        return ""
    if confirmer is not None:
        second = COUNTERSIGNED_BY if status in RAN else template
        line = f"{CONFIRMER.format(who=confirmer)}; {second.format(who=who, when=when)}"
    else:
        line = template.format(who=who, when=when)
    return line[:1].upper() + line[1:]
