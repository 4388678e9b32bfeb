"""Who may answer a card: the actor, the card's signed token, and verify() — every check made
before a claim (DESIGN §3.1, §6.3 and §6.8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from flask import current_app
from itsdangerous import BadData, BadSignature, SignatureExpired, URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode, base64_encode

from app.copilot import audit
from app.errors import (
    AgentCannotAnswer,
    BadToken,
    CountersignError,
    Expired,
    NotFound,
    OutsideToolsets,
    OwnCountersign,
    WrongPerson,
)
from app.extensions import db
from app.models import Approval, Run, User
from app.status import Refusal, RunStatus

TOKEN_SALT = "countersign.approval-token"
SECOND_SALT = "countersign.countersignature"  # a second signature's token is never a card's, nor the reverse


@dataclass(frozen=True)
class Actor:
    """Who acts: the person, the session (or token) their card tokens are bound to, the channel,
    whether the credential acts for an agent (then it never answers: DESIGN §6.8), and the
    toolsets it is limited to (None: the app's)."""

    user: User
    binding: str
    channel: str = "web"
    agent: bool = False
    toolsets: tuple[str, ...] | None = None

    @property
    def credential(self) -> str:
        """The credential as a card remembers it: "web", "api:pat:3", "mcp:pat:3", "telegram", …
        (never a session id)."""
        kind, _, ident = self.binding.partition(":")
        if kind == "pat":
            return f"{self.channel}:pat:{ident}"
        if kind == "web" and self.channel != "web":
            return f"{self.channel}:session"
        return self.channel


def asked_by(run: Run, channel: str) -> dict[str, Any]:
    """Who a card asked for in `run` is shown as asked by (requested_via, requested_by_agent):
    the run's credential, or an agent's when agent credential words came into the conversation
    after the message that started the run and have reached the model (their run is past its
    queue): it asks after reading them (a continuation after the person's answer), so the card
    is not hers and moves no wait of hers."""
    if run.agent or run.message_id is None:  # (no message started it: a direct call)
        return {"requested_via": run.via or channel, "requested_by_agent": bool(run.agent)}
    agents = db.session.scalar(
        sa.select(Run.via)
        .where(Run.conversation_id == run.conversation_id, Run.agent.is_(True))
        .where(Run.message_id > run.message_id, Run.status != RunStatus.QUEUED)  # read by the model by now
        .order_by(Run.id.desc())
        .limit(1)
    )
    if agents is not None:
        return {"requested_via": agents, "requested_by_agent": True}
    return {"requested_via": run.via or channel, "requested_by_agent": False}


@dataclass(frozen=True)
class ChannelProof:
    """In place of a card's token: the channel itself proved the sender (a verified chat thread's
    signature, an MCP session's own token). verify() still makes every other check."""

    how: str


class Proof(NamedTuple):
    """A read proof: whom and which session the token was signed for (its payload), and whether
    it is past its age."""

    payload: dict[str, object]
    expired: bool

    def names(self, actor: Actor) -> bool:
        """Signed for this person in this very session (or token), and not past its age."""
        return not self.expired and self.payload.get("u") == actor.user.id and self.payload.get("b") == actor.binding


def reachable(toolsets: tuple[str, ...]) -> set[str]:
    """The actions a credential limited to these toolsets reaches."""
    return set(current_app.extensions["countersign"].reachable(toolsets))


def reaches(toolsets: tuple[str, ...] | None, action_name: str) -> bool:
    """Whether a credential limited to these toolsets (None: the app's) reaches this action."""
    return action_name in current_app.extensions["countersign"].reachable(toolsets)


def may_answer(actor: Actor, approval: Approval) -> bool:
    """Whether this credential may be given a token for this card (verify() checks it again)."""
    return not actor.agent and (actor.toolsets is None or reaches(actor.toolsets, approval.action))


def ttl() -> int:
    return int(current_app.config["APPROVALS_TTL"])


def serializer(salt: str = TOKEN_SALT) -> URLSafeTimedSerializer:
    keys = [*current_app.config.get("SECRET_KEY_FALLBACKS", []), current_app.config["SECRET_KEY"]]
    return URLSafeTimedSerializer(keys, salt=salt)


def sign(approval: Approval, binding: str) -> str:
    """A token for this approval, this person and this session."""
    return serializer().dumps({"a": approval.id, "u": approval.user_id, "b": binding})


def refuse(error: CountersignError, why: str, actor: Actor, approval: Approval | None, approval_id: str) -> CountersignError:
    """Record a refused attempt in a transaction of its own and hand back the error."""
    audit.record_now(
        "approval.attempt",
        "refused_attempt",
        tenant_id=actor.user.tenant_id,
        user_id=actor.user.id,
        approval_id=approval.id if approval else approval_id[:32],
        detail=why,
        channel=actor.channel,
    )
    return error


def _canonical(token: str) -> bool:
    """Base64 leaves spare bits in a part's last character, so "…A" and "…B" can decode to the same
    bytes and pass the signature. Only the spelling sign() produces is accepted: any changed
    character makes a different token, and a different token is refused."""
    try:
        return all(base64_encode(base64_decode(part)).decode() == part for part in token.split(".") if part)
    except BadData:
        return False


def read_proof(approval_id: str, proof: str | ChannelProof, actor: Actor) -> Proof:
    """The checks before anything is read: an agent credential is refused (it answers nothing,
    whatever it holds), then the token (a forged or mangled one; a ChannelProof stands for it).
    Raises AgentCannotAnswer or BadToken (each audited)."""
    if actor.agent:
        raise refuse(AgentCannotAnswer(), Refusal.AGENT_CREDENTIAL, actor, None, approval_id)
    if isinstance(proof, ChannelProof):
        return Proof({"a": approval_id, "u": actor.user.id, "b": actor.binding}, False)
    return Proof(*_read_token(approval_id, proof, actor))


def verify(approval_id: str, proof: str | ChannelProof, actor: Actor, read: Proof | None = None) -> Approval:
    """Every check before a claim: the proof (read_proof, unless `read` already), then the
    approval's tenant, person and session, and the credential's toolsets. Raises
    AgentCannotAnswer, BadToken, NotFound, Expired, WrongPerson or OutsideToolsets (each audited)."""
    payload, expired = read or read_proof(approval_id, proof, actor)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != actor.user.tenant_id:
        raise refuse(NotFound(), Refusal.NOT_FOUND, actor, None, approval_id)
    if expired:
        raise refuse(Expired(), Refusal.TOKEN_EXPIRED, actor, approval, approval_id)
    if payload.get("u") != actor.user.id or approval.user_id != actor.user.id or payload.get("b") != actor.binding:
        raise refuse(WrongPerson(), Refusal.WRONG_PERSON_OR_SESSION, actor, approval, approval_id)
    if actor.toolsets is not None and not reaches(actor.toolsets, approval.action):
        raise refuse(OutsideToolsets(), Refusal.OUTSIDE_TOOLSETS, actor, approval, approval_id)
    return approval


def sign_second(approval_id: str, signer: User, binding: str) -> str:
    """A countersignature token: this approval, this second person, this session (or token)."""
    return serializer(SECOND_SALT).dumps({"a": approval_id, "u": signer.id, "b": binding})


def verify_second(approval_id: str, token: object, actor: Actor) -> Approval:
    """Every check of a second signature's credential before its claim. The countersigner is not
    the card's person, so verify() cannot vouch for them: an agent credential is refused first;
    then the countersignature token (its own salt: a card's token is no countersignature), the
    tenant, the signer and session it was signed for, the credential's toolsets; and the person
    who asked (or confirmed) never countersigns. Who the action's rule allows is the engine's
    check (countersigning.countersign). Raises AgentCannotAnswer, BadToken, NotFound, Expired or
    WrongPerson (each audited)."""
    if actor.agent:
        raise refuse(AgentCannotAnswer(), Refusal.COUNTERSIGN_AGENT_CREDENTIAL, actor, None, approval_id)
    payload, expired = _read_token(approval_id, token, actor, SECOND_SALT)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != actor.user.tenant_id:
        raise refuse(NotFound(), Refusal.COUNTERSIGN_NOT_FOUND, actor, None, approval_id)
    if expired:
        raise refuse(Expired(), Refusal.COUNTERSIGN_TOKEN_EXPIRED, actor, approval, approval_id)
    if payload.get("u") != actor.user.id or payload.get("b") != actor.binding:
        raise refuse(WrongPerson(), Refusal.COUNTERSIGN_WRONG_PERSON_OR_SESSION, actor, approval, approval_id)
    if actor.user.id in (approval.user_id, approval.confirmed_by):
        raise refuse(OwnCountersign(), Refusal.COUNTERSIGN_OWN_REQUEST, actor, approval, approval_id)
    if actor.toolsets is not None and not reaches(actor.toolsets, approval.action):
        raise refuse(OutsideToolsets(), Refusal.COUNTERSIGN_OUTSIDE_TOOLSETS, actor, approval, approval_id)
    return approval


def _read_token(approval_id: str, token: object, actor: Actor, salt: str = TOKEN_SALT) -> tuple[dict[str, object], bool]:
    """The token's payload naming this approval, and whether it is past its age; BadToken else."""
    signer = serializer(salt)
    if not isinstance(token, str) or not _canonical(token):
        raise refuse(BadToken(), Refusal.BAD_TOKEN, actor, None, approval_id)
    try:
        payload, expired = signer.loads(token, max_age=ttl()), False
    except SignatureExpired as error:  # authentic but old: read it to name the approval
        payload, expired = signer.load_payload(error.payload) if error.payload is not None else None, True
    except BadSignature:
        raise refuse(BadToken(), Refusal.BAD_TOKEN, actor, None, approval_id) from None
    if not isinstance(payload, dict) or payload.get("a") != approval_id:
        raise refuse(BadToken(), Refusal.TOKEN_FOR_OTHER_APPROVAL, actor, None, approval_id)
    return payload, expired
