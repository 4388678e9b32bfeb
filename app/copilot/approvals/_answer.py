"""Every answer to a card or a form comes here first (approvals.answer): the token or the
channel's proof verified, then one small function per verb — confirm, cancel and submit below
(_handle.py runs the card), decline in _decline.py, edit and refresh in _revise.py, the first of
two signatures in _countersigning.py. Nothing but the audit log changes on a refusal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.copilot.actions import Registry
from app.copilot.approvals import _revise as revise
from app.copilot.approvals._countersigning import first_signature
from app.copilot.approvals._decline import decline
from app.copilot.approvals._handle import confirmed, submit
from app.copilot.approvals._machine import check_open, claim, claim_outright
from app.copilot.approvals._tokens import Actor, ChannelProof, read_proof, verify
from app.errors import BadValues
from app.models import Approval
from app.status import ApprovalType, Decision, Status

# What each answer may be given to (None: either kind) and the status its claim moves to.
ANSWERS: dict[str, tuple[ApprovalType, Status]] = {
    Decision.CONFIRM: (ApprovalType.CONFIRM, Status.RUNNING),
    Decision.CANCEL: (ApprovalType.FORM, Status.CANCELLED),
    Decision.SUBMIT: (ApprovalType.FORM, Status.RUNNING),
}  # and decline (with the person's reason, _decline.py); revise.ANSWERS: edit, refresh


def answer(
    approval_id: str,
    proof: str | ChannelProof,
    actor: Actor,
    decision: str,
    registry: Registry,
    values: Mapping[str, Any] | None = None,
) -> Approval:
    """The one entry for every answer on every channel: 'confirm' (a card), 'decline' (either),
    'cancel' (a form: Not now), 'submit' (a form, with `values`), a decline's reason in
    `values`; 'edit' and 'refresh' are revise.answer's. `proof` is the card's token, or
    the channel's own proof of the sender. Returns the approval in its final state, or raises a
    CountersignError having changed nothing but the audit log."""
    read = read_proof(approval_id, proof, actor)
    if decision == Decision.CONFIRM and (claimed := claim_outright(approval_id, read, actor)) is not None:
        return confirmed(claimed, actor, registry)  # the common confirm: checked and claimed in one statement
    approval = verify(approval_id, proof, actor, read)
    if decision == Decision.DECLINE:
        return decline(approval, actor, (values or {}).get("reason"))
    if decision in revise.ANSWERS:
        return revise.answer(approval, actor, decision, registry, values or {})
    only_for, target = ANSWERS[decision]
    if only_for is not None and approval.type != only_for:
        if decision == Decision.SUBMIT:
            raise BadValues("This card has no form: confirm or decline it.")
        raise BadValues(f"This {approval.type} cannot be answered with {decision}.")
    check_open(approval, actor)
    if decision == Decision.SUBMIT:
        return submit(approval, actor, registry, values or {})
    if decision == Decision.CONFIRM and approval.countersign:  # the first of two signatures: nothing runs yet
        return first_signature(approval, proof, actor)
    claim(approval, target, actor)
    return confirmed(approval, actor, registry) if target is Status.RUNNING else approval
