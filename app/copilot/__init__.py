"""The engine's front door: what every delivery (web, API, admin, auth, connectors, MCP, the CLI)
calls. A message queues a turn (app.copilot.turns); an answer is decided by app.copilot.approvals,
and then this module queues what follows it: the card's delivery, a countersigner's notice, the
run's continuation. Nothing in the engine imports this module back: the worker runs turns
through the turns package alone."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask

from app.copilot import approvals, turns
from app.copilot.actions import registry
from app.copilot.approvals import Actor, ChannelProof
from app.copilot.turns import (
    Claimed,
    Engine,
    active,
    answers,
    call,
    call_direct,
    card_message_id,
    check_own,
    context_for,
    drain,
    engine,
    execute,
    listen,
    listen_cards,
    listen_countersign,
    listen_decided,
    newest_message_id,
    preload,
    retry,
    stop,
    submit,
    sweep_dead,
    tune_collector,
    wait,
    worker,
)
from app.errors import Expired
from app.extensions import db
from app.models import Approval, Conversation, Message, Run, User
from app.status import Decision, Status

__all__ = [
    "Claimed",
    "Engine",
    "active",
    "answer",
    "answers",
    "call",
    "call_direct",
    "card_message_id",
    "check_own",
    "context_for",
    "countersign",
    "drain",
    "engine",
    "execute",
    "expire_due",
    "init_app",
    "listen",
    "listen_cards",
    "listen_countersign",
    "listen_decided",
    "newest_message_id",
    "person",
    "preload",
    "retry",
    "revoke",
    "send_message",
    "stop",
    "submit",
    "supersede",
    "sweep_dead",
    "sweep_interrupted",
    "tune_collector",
    "wait",
    "worker",
]

log = logging.getLogger(__name__)


def init_app(app: Flask) -> None:
    """The engine's per-app state beside app.extensions["countersign"] (the Engine): where turns
    run, and the list of turn listeners (`listen`)."""
    turns.init_app(app)


def person(user: User, channel: str) -> Actor:
    """The person themself on a channel (the browser, a verified chat thread): no limit of its own."""
    return Actor(user=user, binding=channel, channel=channel)


def send_message(
    conversation: Conversation, actor: Actor, text: str, submit: bool = True, claim: bool = False
) -> tuple[Message, Run]:
    """The person says something through `actor` (its scope and toolsets bind the run): the
    message is kept and its turn queued; the turn runs in a worker (turns.start; `claim`: the
    caller runs it itself, see there)."""
    return turns.start(conversation, actor, text, submit, claim)


def answer(
    approval_id: str,
    proof: str | ChannelProof,
    actor: Actor,
    decision: str,
    values: Mapping[str, Any] | None = None,
    reason: str | None = None,
) -> Approval:
    """The person answers a card or a form (every delivery comes here, see approvals.answer):
    decide — handle() runs here when confirmed or submitted — and queue the run's continuation;
    the model's words follow on its events. An edit or a refresh returns the fresh card, which
    keeps the run waiting."""
    try:
        if decision == Decision.DECLINE:
            values = {"reason": reason}  # the person's words for the model (approvals: decline)
        approval = queued(approvals.answer(approval_id, proof, actor, decision, registry(), values))
    except Expired:
        _tell_expired(approval_id, actor)
        raise
    if approval.status == Status.COUNTERSIGNING and decision == Decision.CONFIRM:
        turns.queue_countersign_notice(approval)
    _decided(approval)
    return approval


def countersign(approval_id: str, token: object, actor: Actor, decision: str, reason: object = None) -> Approval:
    """A second person countersigns (handle() runs here, as the person who asked) or declines a
    card waiting for its countersignature (countersigning.countersign); the run's continuation is queued."""
    try:
        approval = queued(approvals.countersign(approval_id, token, actor, decision, registry(), reason))
    except Expired:
        stale = db.session.get(Approval, approval_id)
        if stale is not None and stale.tenant_id == actor.user.tenant_id and approvals.expire(stale, channel=actor.channel):
            _decided(stale)
        raise
    _decided(approval)
    return approval


def _decided(approval: Approval) -> None:
    """What follows any decision: the waiting run is told, and where the card was sent outside its
    page and thread (`posted`), those messages show the outcome (turns.listen_decided)."""
    turns.resume_if_ready(approval.run_id)
    if approval.posted:
        turns.tell("decided", approval.id)


def _tell_expired(approval_id: str, actor: Actor) -> None:
    """Past its time: end it as expired (if nobody has yet) and tell the model."""
    stale = db.session.get(Approval, approval_id)
    if stale is not None and stale.user_id == actor.user.id:
        approvals.expire(stale, channel=actor.channel)
        if stale.status == Status.EXPIRED:
            _decided(stale)


def revoke(approval_id: str, admin: User, by_agent: bool = False) -> Approval:
    """An admin revokes a pending approval; the waiting run is told. An agent credential may not."""
    approval = approvals.revoke(approval_id, admin, by_agent=by_agent)
    _decided(approval)
    return approval


def supersede(approval_id: str, channel: str) -> None:
    """A newer card replaced this one in a chat thread; the waiting run is told."""
    approval = approvals.supersede(approval_id, channel)
    if approval is not None:
        _decided(approval)


def expire_due(conversation_id: int | None = None, user_id: int | None = None) -> list[Approval]:
    """End every pending approval past its time (of a conversation, a person, or all) and tell
    the waiting runs."""
    ended = []
    for approval in approvals.due_for_expiry(conversation_id, user_id):
        if approvals.expire(approval):
            ended.append(approval)
            _decided(approval)
    return ended


def sweep_interrupted(older_than_seconds: int) -> list[Approval]:
    """End approvals whose process died mid-handle() as `interrupted`, and tell the runs."""
    ended = approvals.mark_interrupted(older_than_seconds)
    for approval in ended:
        _decided(approval)
    return ended


def queued(approval: Approval) -> Approval:
    """Hand a card that ended `queued` to the job that delivers it (after its commit: the job reads
    what handle() queued). A queue that is down leaves it queued, as it honestly is."""
    if approval.status == Status.QUEUED:
        try:
            call(approvals.DELIVERY_JOB, approval.id)
            db.session.refresh(approval)  # (run already, by an inline runner)
        except Exception:
            log.warning("could not queue the delivery of %s", approval.id, exc_info=True)
    return approval
