"""A decline, whole: what happens when a card's person — or the second signer of a card that
needs two — says no. Read decline() below; its helpers are named for what they do."""

from __future__ import annotations

from app.copilot.approvals._machine import check_open, claim
from app.copilot.approvals._tokens import Actor
from app.copilot.text import text_problem
from app.errors import BadValues, UnstorableText
from app.models import Approval
from app.status import Status

REASON_MAX = 1000  # characters of a decline's reason (the person's words to the model)


def decline(approval: Approval, actor: Actor, given_reason: object, *, by_second_signer: bool = False) -> Approval:
    """Decline a verified answer's card or form (approvals.answer), or a card waiting for its
    countersignature (countersign(), `by_second_signer`, which checked that one is still open and
    that this signer may answer it). Nothing runs, ever (DESIGN §6.5):

    1. Still open? A card past its time ends `expired` (Expired); one decided already is refused
       with who decided it and when (AlreadyDecided); each refusal is audited. Its person may still
       withdraw a card that waits for its countersignature.
    2. The reason, if any, is checked whole: the decliner's own words for the model, at most
       REASON_MAX characters, nothing unstorable; else refused and the card still waits.
    3. The claim: one conditional UPDATE from the status it was read in to `declined` (only one
       answer anywhere wins: a loser is refused as in 1), the reason kept as `feedback`, audited
       as decided ("a reason was given", never the words) and committed at once; every open view
       of the conversation is told the card changed.

    Then the front door (copilot.answer, copilot.countersign) queues the run's next pass once every
    card of its step is decided, and the model reads the outcome with the reason quoted as the
    decliner's own words, never as instructions (told()). The card shows "Declined", and by whom."""
    if not by_second_signer:
        check_open(approval, actor, withdrawing=True)
    said = reason(given_reason)
    detail = "a reason was given" if said else ""
    claim(approval, Status.DECLINED, actor, detail, source=Status(approval.status), feedback=said)
    return approval


def reason(given: object) -> str | None:
    """A decline's reason as it will be stored (the person's words, meant for the model), or None.
    Too long or unstorable: refused whole, the card still waits."""
    if given is None:
        return None
    if not isinstance(given, str):
        raise BadValues("The reason must be text.")
    said = given.strip()
    problem = text_problem(said)
    if problem:
        raise UnstorableText(problem)
    if len(said) > REASON_MAX:
        raise BadValues(f"The reason is too long: {len(said)} characters, at most {REASON_MAX}. Nothing was decided.")
    return said or None
