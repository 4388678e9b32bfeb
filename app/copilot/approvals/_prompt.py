"""One view of a card or a form for one viewer (DESIGN §5 `Prompt`): the action's sentence and rows,
never the model's words; the tokens it carries; its outcome and who decided it. Every channel renders
a Prompt and decides none of this itself: prompt_for holds the one rule for who gets a token, and
recover the one way back to a card after a refused answer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from app.copilot.actions import registry
from app.copilot.approvals._countersigning import may_countersign
from app.copilot.approvals._machine import WAITING
from app.copilot.approvals._outcomes import card_label, chat_outcome, decided_by_line
from app.copilot.approvals._revise import edit_form, fresh_id, told
from app.copilot.approvals._tokens import Actor, may_answer, sign, sign_second
from app.errors import CountersignError, NotFound
from app.extensions import db
from app.models import Approval, User, utcnow
from app.status import ApprovalType, Status, badge


@dataclass(frozen=True)
class Row:
    """One row of a card: the action's label and value, as text."""

    label: str
    value: str


@dataclass(frozen=True)
class Prompt:
    """A card or a form as one viewer sees it now. `token` answers it as its person (while it waits
    for them, or for its second signature: she may still withdraw it), `second_token` gives its
    second signature, `refresh_token` asks a changed card afresh; each is None unless this viewer
    may do that now."""

    id: str
    type: ApprovalType
    action: str
    status: Status
    text: str  # the action's sentence (approval_reason), or the form's message
    rows: tuple[Row, ...]
    form: dict[str, Any] | None  # a form's elicitation (message, requestedSchema)
    expires_at: datetime
    seconds_left: int
    waiting: bool  # pending, or waiting for its second signature, and within its time
    mine: bool  # the viewer is the person who asked
    token: str | None
    second_token: str | None
    refresh_token: str | None
    reply: bool  # a chat reply of its person may answer it (a one-signature card she asked for herself)
    edit: dict[str, Any] | None  # the Edit form (the action's `editable` fields) while she may answer
    outcome: str | None  # the card's label for its state (None while it waits for its person)
    badge: Status | None
    decided_by: str | None  # "Declined by you, …" (None while undecided)
    decided_at: datetime | None
    chat: str | None  # the line a chat thread is told of its state, with who decided
    told: str | None  # the line the model (an MCP client) reads once it no longer waits
    person: str  # who asked: the person's email
    requested_via: str | None
    requested_by_agent: bool
    confirmed_by: str | None  # the first signature's email, on a card that needs two
    countersign: str | None  # who may give the second signature (the rule's label)
    changes: list[dict[str, str]] | None  # on a changed card: the rows that differ
    fresh_id: str | None  # the card that replaced a changed one, once made
    replaces: str | None
    edited: list[str] | None
    error: str | None = None  # why the last answer was refused (recover)

    @property
    def answerable(self) -> bool:
        """Whether this viewer may answer it now (as its person, or with the second signature)."""
        return self.token is not None or self.second_token is not None

    @property
    def final(self) -> bool:
        return self.status.final

    @property
    def asking(self) -> bool:
        """Waiting, within its time, for its person's answer."""
        return self.waiting and self.status is Status.PENDING

    @property
    def awaiting_second(self) -> bool:
        """Waiting, within its time, for its second signature."""
        return self.waiting and self.status is Status.COUNTERSIGNING


@dataclass(frozen=True)
class _Tokens:
    token: str | None = None
    second_token: str | None = None
    refresh_token: str | None = None


def _tokens(approval: Approval, viewer: Actor, status: Status, waiting: bool, made_afresh: bool) -> _Tokens:
    """THE rule for who gets a token: a card token only for the card's own person, on a credential
    that may answer it (never an agent's, never outside its toolsets), while it waits within its
    time (she may still withdraw one that waits for its second signature); a countersignature token
    only for another person of the tenant whom the action's rule allows, while it waits for that
    signature; a Fresh-card token only for the person of a changed card not yet made afresh."""
    mine = approval.user_id == viewer.user.id
    if not may_answer(viewer, approval):
        return _Tokens()
    if waiting and mine:
        return _Tokens(token=sign(approval, viewer.binding))
    if waiting and status is Status.COUNTERSIGNING and _allowed(approval, viewer):
        return _Tokens(second_token=sign_second(approval.id, viewer.user, viewer.binding))
    if status is Status.CHANGED and approval.changes and mine and not made_afresh:
        return _Tokens(refresh_token=sign(approval, viewer.binding))
    return _Tokens()


def prompt_for(approval: Approval, viewer: Actor) -> Prompt:
    """The card as `viewer` may see it now (the tokens: _tokens, the one rule); NotFound for a
    viewer of another tenant."""
    if approval.tenant_id != viewer.user.tenant_id:
        raise NotFound()
    status, now = Status(approval.status), utcnow()
    waiting = status in WAITING and approval.expires_at > now
    fresh = fresh_id(approval.id) if status is Status.CHANGED and approval.changes else None
    if fresh is not None and db.session.get(Approval, fresh) is None:
        fresh = None  # not made (yet)
    given = _tokens(approval, viewer, status, waiting, made_afresh=fresh is not None)
    mine = approval.user_id == viewer.user.id
    asking = waiting and status is Status.PENDING  # waiting for its person's answer
    one_signature = approval.type == ApprovalType.CONFIRM and not approval.countersign
    action = registry().get(approval.action) if given.token and asking and approval.type == ApprovalType.CONFIRM else None
    confirmer = db.session.get(User, approval.confirmed_by) if approval.confirmed_by else None
    return Prompt(
        id=approval.id,
        type=ApprovalType(approval.type),
        action=approval.action,
        status=status,
        text=approval.reason,
        rows=tuple(Row(r["label"], r["value"]) for r in approval.rows),
        form=approval.form if approval.type == ApprovalType.FORM else None,
        expires_at=approval.expires_at,
        seconds_left=max(0, int((approval.expires_at - now).total_seconds())),
        waiting=waiting,
        mine=mine,
        token=given.token,
        second_token=given.second_token,
        refresh_token=given.refresh_token,
        reply=asking and given.token is not None and one_signature and not approval.requested_by_agent,
        edit=edit_form(action, approval) if action is not None else None,
        outcome=None if asking else card_label(approval),
        badge=None if asking else badge(approval),
        decided_by=decided_by_line(approval, viewer.user.id) or None,
        decided_at=approval.decided_at if status.final else None,
        chat=None if asking else chat_outcome(approval),
        told=None if status in WAITING else told(approval),
        person=approval.user.email,
        requested_via=approval.requested_via or None,
        requested_by_agent=bool(approval.requested_by_agent),
        confirmed_by=confirmer.email if confirmer is not None else None,
        countersign=approval.countersign,
        changes=approval.changes,
        fresh_id=fresh,
        replaces=approval.replaces,
        edited=approval.edited,
    )


def _allowed(approval: Approval, viewer: Actor) -> bool:
    return may_countersign(approval, viewer.user, registry())


def may_see(approval: Approval, viewer: Actor) -> bool:
    """Whether this viewer may see the card at all: its person, or — on a card that needs a
    countersignature — a second person its rule allows, or who gave (or refused) that signature."""
    if approval.tenant_id != viewer.user.tenant_id:
        return False
    if approval.user_id == viewer.user.id:
        return True
    return bool(approval.countersign) and (approval.decided_by == viewer.user.id or _allowed(approval, viewer))


def recover(approval_id: str, viewer: Actor, error: CountersignError) -> Prompt:
    """After a refused answer (it changed nothing but the audit log), the card as it now stands for
    this viewer — decided elsewhere meanwhile, perhaps — with the refusal's message on it. Raises
    `error` again where the viewer may not see the card (gone, another tenant, not theirs)."""
    db.session.rollback()  # (and every loaded row is read again: as it now stands)
    approval = db.session.get(Approval, approval_id)
    if approval is None or isinstance(error, NotFound) or not may_see(approval, viewer):
        raise error
    return replace(prompt_for(approval, viewer), error=error.message)
