"""Approvals: create a card, sign its token, and decide it — verify, claim, authorize
again, rebuild and compare, and only then handle(). The one path to a card's handle()."""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from flask import current_app
from itsdangerous import BadData, BadSignature, SignatureExpired, URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode, base64_encode
from pydantic import BaseModel, ValidationError
from werkzeug.datastructures import MultiDict

from app.copilot import audit, lookalike
from app.copilot.actions import Action, ActionContext, Registry, needs_card_with
from app.copilot.schema import elicitation, wtform_class
from app.errors import (
    AgentCannotAnswer,
    AlreadyDecided,
    BadToken,
    BadValues,
    CountersignError,
    Expired,
    FormInvalid,
    FormNeedsCard,
    NotFound,
    OutsideToolsets,
    PartlyDone,
    TooManyPending,
    WrongPerson,
)
from app.extensions import db
from app.models import Approval, Run, User, utcnow

log = logging.getLogger(__name__)

TOKEN_SALT = "countersign.approval-token"
WARNING = "Warning"  # the card row that says what on it could pass for something else
FINAL = {"done", "declined", "cancelled", "changed", "refused", "expired", "revoked", "failed", "interrupted", "superseded"}

# What the model reads for each outcome (done and failed add the action's own words).
MODEL_LINES = {
    "declined": "The person declined. Nothing was done.",
    "changed": "The card changed before the person confirmed (the record is not what it was), "
    "so nothing ran. Ask again if it is still wanted.",
    "refused": "Refused at confirmation: the person may no longer do this. Nothing ran.",
    "expired": "The card expired before the person answered. Nothing was done.",
    "revoked": "An admin revoked this request. Nothing was done.",
    "superseded": "A newer request replaced this one before the person answered. Nothing was done.",
    "cancelled": "The person set this aside for now (Not now). Nothing was done; do not ask again unless they do.",
    "interrupted": "Interrupted: the server stopped while this ran. It will not be retried; "
    "check the result before asking again.",
}


@dataclass(frozen=True)
class Card:
    """What the person is asked: the action's sentence and rows, and their digest."""

    action: str
    reason: str
    rows: list[dict[str, str]]

    @property
    def digest(self) -> str:
        canonical = json.dumps(
            {"action": self.action, "reason": self.reason, "rows": self.rows},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


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


def reaches(toolsets: tuple[str, ...] | None, action_name: str) -> bool:
    """Whether a credential limited to these toolsets (None: the app's) reaches this action."""
    return action_name in current_app.extensions["countersign"].reachable(toolsets)


def may_answer(actor: Actor, approval: Approval) -> bool:
    """Whether this credential may be given a token for this card (verify() checks it again)."""
    return not actor.agent and (actor.toolsets is None or reaches(actor.toolsets, approval.action))


def visible(value: Any) -> str:
    """Text for a card: control, bidi and zero-width characters shown as ⟨U+XXXX⟩."""
    out = []
    for ch in str(value):
        if unicodedata.category(ch) in {"Cc", "Cf"} and ch not in "\n\t":
            out.append(f"⟨U+{ord(ch):04X}⟩")
        else:
            out.append(ch)
    return "".join(out)


def build_card(action: type[Action], ctx: ActionContext, input: BaseModel) -> Card:
    """Ask the action (never the model) for the sentence and the rows. A word on the card that
    mixes scripts (a Cyrillic "а" in "pаypal") adds a Warning row saying so, on every card."""
    instance = action()
    reason = visible(instance.approval_reason(ctx, input))
    summary = {str(k): str(v) for k, v in (instance.approval_summary(ctx, input) or {}).items()}
    odd = [w for text in (reason, *summary.values()) for w in lookalike.warnings(text) if w not in summary.get(WARNING, "")]
    if odd:
        summary[WARNING] = " ".join(filter(None, [summary.get(WARNING, ""), *dict.fromkeys(odd)]))
    rows = [{"label": visible(k), "value": visible(v)} for k, v in summary.items()]
    return Card(action=action.name, reason=reason, rows=rows)


def won(statement: sa.Update) -> bool:
    """Run a conditional UPDATE; True when it changed exactly one row (this caller won)."""
    result = db.session.execute(statement.execution_options(synchronize_session=False))
    return cast("sa.CursorResult[Any]", result).rowcount == 1


def card_url(approval_id: str) -> str:
    """The card's own page, for links from MCP clients and chat connectors."""
    return f"{current_app.config['PUBLIC_URL'].rstrip('/')}/approvals/{approval_id}"


def ttl() -> int:
    return int(current_app.config["APPROVALS_TTL"])


def serializer() -> URLSafeTimedSerializer:
    keys = [*current_app.config.get("SECRET_KEY_FALLBACKS", []), current_app.config["SECRET_KEY"]]
    return URLSafeTimedSerializer(keys, salt=TOKEN_SALT)


def sign(approval: Approval, binding: str) -> str:
    """A token for this approval, this person and this session."""
    return serializer().dumps({"a": approval.id, "u": approval.user_id, "b": binding})


def _check_cap(ctx: ActionContext, run: Run, action: type[Action]) -> None:
    """Raise TooManyPending (audited) when the run already holds its share of pending approvals,
    or the person does across all their runs (an agent starting run after run cannot flood them)."""
    pending = sa.select(sa.func.count()).select_from(Approval).where(Approval.status == "pending")
    in_run = db.session.scalar(pending.where(Approval.run_id == run.id)) or 0
    if in_run >= int(current_app.config["APPROVALS_MAX_PENDING_PER_RUN"]):
        why = f"run {run.id} already holds {in_run} pending"
    else:
        mine = db.session.scalar(pending.where(Approval.user_id == ctx.user.id, Approval.expires_at > utcnow())) or 0
        if mine < int(current_app.config["APPROVALS_MAX_PENDING_PER_PERSON"]):
            return
        why = f"the person already has {mine} pending"
    audit.record(
        "approval.create",
        "refused_cap",
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        detail=f"{action.name}: {why}",
        channel=ctx.channel,
    )
    raise TooManyPending()


def _new(ctx: ActionContext, run: Run, action: type[Action], **fields: Any) -> Approval:
    now = utcnow()
    approval = Approval(
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        run_id=run.id,
        conversation_id=run.conversation_id,
        action=action.name,
        status="pending",
        created_at=now,
        expires_at=now + timedelta(seconds=ttl()),
        requested_via=run.via or ctx.channel,
        requested_by_agent=bool(run.agent),
        **fields,
    )
    db.session.add(approval)
    db.session.flush()
    audit.record(
        "approval.created",
        "pending",
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        approval_id=approval.id,
        detail=f"{action.name} ({approval.type})",
        channel=ctx.channel,
    )
    return approval


def create(
    ctx: ActionContext,
    run: Run,
    action: type[Action],
    input: BaseModel,
    *,
    tool_call_id: str,
    step: int,
) -> Approval:
    """A pending card for this call. Raises TooManyPending past the run's cap and
    NotFound when the card names a record outside the person's tenant."""
    _check_cap(ctx, run, action)
    card = build_card(action, ctx, input)
    return _new(
        ctx,
        run,
        action,
        tool_call_id=tool_call_id,
        step=step,
        type="confirm",
        arguments=input.model_dump(mode="json"),
        reason=card.reason,
        rows=card.rows,
        digest=card.digest,
    )


def create_form(
    ctx: ActionContext,
    run: Run,
    action: type[Action],
    given: dict[str, Any],
    *,
    tool_call_id: str,
    step: int,
) -> Approval:
    """A pending form for a READ/WRITE call that left fields out; the model's values pre-fill it.
    FormNeedsCard when the call, or every choice the form could offer, needs a card."""
    _check_cap(ctx, run, action)
    shape = action().ask(ctx, dict(given)) or {}
    known = set(action.Input.model_fields)
    given = {k: v for k, v in given.items() if k in known}
    if action.kind.needs_card or needs_card_with(action, given):  # the kind too, should needs_card() be overridden
        raise FormNeedsCard()
    form = _card_free(
        action,
        given,
        elicitation(
            action.Input,
            shape.get("message") or f"A few details for {action.name.replace('_', ' ')}.",
            fields=shape.get("fields"),
            defaults={**given, **shape.get("defaults", {})},
            where=action.source,
        ),
    )
    digest = hashlib.sha256(json.dumps(form, sort_keys=True, default=str).encode()).hexdigest()
    return _new(
        ctx,
        run,
        action,
        tool_call_id=tool_call_id,
        step=step,
        type="form",
        arguments=given,
        reason=form["message"],
        rows=[],
        digest=digest,
        form=form,
    )


def _card_free(action: type[Action], given: dict[str, Any], form: dict[str, Any]) -> dict[str, Any]:
    """The form offers no choice that would need a card (DESIGN §6.6): each option is put to
    needs_card(), the one source. A required field left with no option: FormNeedsCard."""
    schema = form["requestedSchema"]
    for name, prop in list(schema["properties"].items()):
        if "oneOf" not in prop:
            continue
        prop["oneOf"] = [o for o in prop["oneOf"] if not needs_card_with(action, {**given, name: o["const"]})]
        if prop.get("default") not in [o["const"] for o in prop["oneOf"]]:
            prop.pop("default", None)
        if not prop["oneOf"]:
            if name in schema["required"]:
                raise FormNeedsCard()
            del schema["properties"][name]
    return form


def model_line(approval: Approval) -> str:
    """The line the model reads for a decided approval."""
    if approval.status == "done":
        return (approval.result or "Done.") if approval.type == "form" else f"Done. {approval.result or ''}".strip()
    if approval.status == "failed":
        result = approval.result or "the action raised an error"
        if result.startswith(PartlyDone.prefix):  # it says itself what was and was not done
            return f"Failed. {result}"
        return f"Failed: {result}. Nothing else was done."
    return MODEL_LINES.get(approval.status, f"Outcome: {approval.status}.")


def _refuse(error: CountersignError, why: str, actor: Actor, approval: Approval | None, approval_id: str) -> CountersignError:
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


def verify(approval_id: str, token: str, actor: Actor) -> Approval:
    """Every check before a claim. An agent credential is refused before anything is read: it
    answers nothing, whatever token it holds. Then the token's signature (a forged or mangled
    token is refused before the approval is even read), tenant, token age, person and session,
    and the credential's toolsets. Raises AgentCannotAnswer, BadToken, NotFound, Expired,
    WrongPerson or OutsideToolsets (each audited)."""
    if actor.agent:
        raise _refuse(AgentCannotAnswer(), "agent_credential", actor, None, approval_id)
    signer = serializer()
    if not _canonical(token):
        raise _refuse(BadToken(), "bad_token", actor, None, approval_id)
    try:
        payload = signer.loads(token, max_age=ttl())
        expired = False
    except SignatureExpired as error:  # authentic but old: read it to name the approval
        payload, expired = signer.load_payload(error.payload) if error.payload is not None else None, True
    except BadSignature:
        raise _refuse(BadToken(), "bad_token", actor, None, approval_id) from None
    if not isinstance(payload, dict) or payload.get("a") != approval_id:
        raise _refuse(BadToken(), "token_for_other_approval", actor, None, approval_id)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != actor.user.tenant_id:
        raise _refuse(NotFound(), "not_found", actor, None, approval_id)
    if expired:
        raise _refuse(Expired(), "token_expired", actor, approval, approval_id)
    if payload.get("u") != actor.user.id or approval.user_id != actor.user.id or payload.get("b") != actor.binding:
        raise _refuse(WrongPerson(), "wrong_person_or_session", actor, approval, approval_id)
    if actor.toolsets is not None and not reaches(actor.toolsets, approval.action):
        raise _refuse(OutsideToolsets(), "outside_toolsets", actor, approval, approval_id)
    return approval


def _open(approval: Approval, actor: Actor, approval_id: str) -> datetime:
    """Raise Expired or AlreadyDecided (audited) unless the approval can still be answered."""
    now = utcnow()
    if approval.status == "pending" and approval.expires_at <= now:
        expire(approval, channel=actor.channel)
    if approval.status != "pending":
        if approval.status == "expired":
            raise _refuse(Expired(), "expired", actor, approval, approval_id)
        raise _refuse(AlreadyDecided(), f"already_{approval.status}", actor, approval, approval_id)
    return now


ANSWERS = {"confirm": ("confirm", "running"), "decline": (None, "declined"), "cancel": ("form", "cancelled")}


def decide(approval_id: str, token: str, actor: Actor, decision: str, registry: Registry) -> Approval:
    """Answer an approval: 'confirm' (a card), 'decline' (either), 'cancel' (a form: Not now).
    Returns the approval in its final state, or raises a CountersignError having changed
    nothing but the audit log."""
    approval = verify(approval_id, token, actor)
    only_for, target = ANSWERS[decision]
    if only_for is not None and approval.type != only_for:
        raise BadValues(f"This {approval.type} cannot be answered with {decision}.")
    now = _open(approval, actor, approval_id)
    if not _claim(approval, target, now, actor):
        db.session.rollback()
        raise _refuse(AlreadyDecided(), "lost_claim", actor, approval, approval_id)
    if target != "running":
        return approval
    return _run_claimed(approval, actor, registry)


def submit(approval_id: str, token: str, actor: Actor, values: Mapping[str, Any], registry: Registry) -> Approval:
    """Answer a form: validate (WTForms, then Input) before any claim, then authorize again and
    handle() with the person's values over the model's. The values are never stored."""
    approval = verify(approval_id, token, actor)
    if approval.type != "form" or approval.form is None:
        raise BadValues("This card has no form: confirm or decline it.")
    now = _open(approval, actor, approval_id)
    action = registry.get(approval.action)
    if action is None:
        raise BadValues("This action no longer exists.")
    input, filled = validate_form(approval.form["requestedSchema"], action, approval.arguments, values)
    if action.needs_card(input):  # whatever field made it so, on any channel: a form never gives a card
        raise _refuse(FormNeedsCard(), "form_needs_card", actor, approval, approval_id)
    if not _claim(approval, "running", now, actor):
        db.session.rollback()
        raise _refuse(AlreadyDecided(), "lost_claim", actor, approval, approval_id)
    ctx = ActionContext(user=actor.user, tenant=actor.user.tenant, db=db.session, channel=actor.channel, approval_id=approval.id)
    try:
        allowed = action().authorize(ctx, input)
    except (CountersignError, PermissionError):
        allowed = False
    told = f"The person filled in: {', '.join(filled) or 'nothing'}."
    if not allowed:
        return _finish(approval, "refused", actor, detail=told)
    try:
        result = action().handle(ctx, input)
    except Exception as exc:  # the action's own failure: recorded, told in short
        db.session.rollback()
        log.exception("handle() of %s failed for form %s", approval.action, approval.id)
        return _finish(approval, "failed", actor, result=short(exc), detail=told)
    return _finish(approval, "done", actor, result=f"{told} {'' if result is None else result}".strip(), detail=told)


def validate_form(
    schema: dict[str, Any], action: type[Action], given: dict[str, Any], values: Mapping[str, Any]
) -> tuple[BaseModel, list[str]]:
    """The Input to run with, and the names of the fields the person filled; FormInvalid otherwise."""
    errors: dict[str, list[str]] = {}
    formdata: MultiDict[str, str] = MultiDict()
    for name in schema["properties"]:
        if name not in values:
            if given.get(name) not in (None, ""):
                formdata.add(name, str(given[name]))  # the pre-filled value the person kept
            continue
        value = values[name]
        if isinstance(value, bool):
            value = "y" if value else ""
        elif isinstance(value, dict | list):
            errors[name] = ["Give a single value."]
            continue
        formdata.add(name, "" if value is None else str(value))
    form = wtform_class(schema)(formdata=formdata)
    if not form.validate():
        for name, messages in form.errors.items():
            errors.setdefault(str(name), [str(m) for m in messages])  # a shape error says enough
    if errors:
        raise FormInvalid(errors)
    data = dict(given)
    filled = []
    for name in schema["properties"]:
        value = form.data[name]
        if value is None or value == "":
            data.pop(name, None)
            continue
        data[name] = value
        if name in values and str(formdata.get(name, "")).strip():
            filled.append(name)
    try:
        return action.Input.model_validate(data), filled
    except ValidationError as exc:
        raise FormInvalid({str(e["loc"][0]) if e["loc"] else "form": [e["msg"]] for e in exc.errors()}) from None


def _claim(approval: Approval, status: str, now: datetime, actor: Actor) -> bool:
    """Move pending -> status atomically; only one caller anywhere can win."""
    values: dict[str, Any] = {"status": status, "claimed_at": now, "decided_by": actor.user.id}
    if status in FINAL:
        values["decided_at"] = now
    if not won(
        sa.update(Approval)
        .where(Approval.id == approval.id, Approval.status == "pending", Approval.expires_at > now)
        .values(**values)
    ):
        return False
    if status in FINAL:
        audit.record(
            "approval.decided",
            status,
            tenant_id=approval.tenant_id,
            user_id=actor.user.id,
            approval_id=approval.id,
            detail=approval.action,
            channel=actor.channel,
        )
    db.session.commit()
    db.session.refresh(approval)
    return True


def _run_claimed(approval: Approval, actor: Actor, registry: Registry) -> Approval:
    """Authorize again, rebuild and compare, then handle() once, as the person."""
    action = registry.get(approval.action)
    ctx = ActionContext(
        user=actor.user,
        tenant=actor.user.tenant,
        db=db.session,
        channel=actor.channel,
        approval_id=approval.id,
    )
    if action is None:
        return _finish(approval, "failed", actor, result="this action no longer exists")
    try:
        input = action.Input.model_validate(approval.arguments)
        allowed = action().authorize(ctx, input)
    except (CountersignError, PermissionError, ValidationError):
        allowed = False
    if not allowed:
        return _finish(approval, "refused", actor)
    try:
        card = build_card(action, ctx, input)
    except CountersignError:
        return _finish(approval, "changed", actor, result="the record is gone")
    if card.digest != approval.digest:
        return _finish(approval, "changed", actor)
    try:
        result = action().handle(ctx, input)
    except Exception as exc:  # the action's own failure: recorded, told in short
        db.session.rollback()
        log.exception("handle() of %s failed for approval %s", approval.action, approval.id)
        return _finish(approval, "failed", actor, result=short(exc))
    return _finish(approval, "done", actor, result="" if result is None else str(result))


def short(exc: Exception) -> str:
    """A failure as the model and the card tell it: one line, never a server path (an OSError's
    file names are left out); a PartlyDone keeps its whole account of what was and wasn't done."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[: 1000 if isinstance(exc, PartlyDone) else 200]


def _finish(approval: Approval, status: str, actor: Actor, result: str | None = None, detail: str = "") -> Approval:
    """Record the outcome of a claimed approval, with the handler's work, in one commit.
    If a sweep already ended it `interrupted` (a handle() slower than the grace), the work
    is rolled back and the approval stays interrupted."""
    if not won(
        sa.update(Approval)
        .where(Approval.id == approval.id, Approval.status == "running")
        .values(status=status, result=result, decided_at=utcnow())
    ):
        db.session.rollback()
        db.session.refresh(approval)
        return approval
    audit.record(
        "approval.decided",
        status,
        tenant_id=approval.tenant_id,
        user_id=actor.user.id,
        approval_id=approval.id,
        detail=f"{approval.action} {detail}".strip(),
        channel=actor.channel,
    )
    db.session.commit()
    db.session.refresh(approval)
    return approval


def revoke(approval_id: str, admin: User, channel: str = "admin", by_agent: bool = False) -> Approval:
    """An admin ends a pending approval of their tenant as `revoked`; nothing runs.
    AgentCannotAnswer for an agent credential (it decides no card, not even as an admin's),
    NotFound outside the admin's tenant, WrongPerson for a non-admin, AlreadyDecided if answered."""
    actor = Actor(user=admin, binding="admin", channel=channel, agent=by_agent)
    if by_agent:
        raise _refuse(AgentCannotAnswer(), "revoke_agent_credential", actor, None, approval_id)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.tenant_id != admin.tenant_id:
        raise _refuse(NotFound(), "revoke_not_found", actor, None, approval_id)
    if not admin.is_admin:
        raise _refuse(WrongPerson("Only an admin of this tenant may revoke."), "revoke_not_admin", actor, approval, approval_id)
    now = utcnow()
    if not won(
        sa.update(Approval)
        .where(Approval.id == approval.id, Approval.status == "pending")
        .values(status="revoked", decided_at=now, decided_by=admin.id)
    ):
        db.session.rollback()
        raise _refuse(AlreadyDecided(), "revoke_already_decided", actor, approval, approval_id)
    audit.record(
        "approval.decided",
        "revoked",
        tenant_id=approval.tenant_id,
        user_id=admin.id,
        approval_id=approval.id,
        detail=approval.action,
        channel=channel,
    )
    db.session.commit()
    db.session.refresh(approval)
    return approval


def supersede(approval_id: str, channel: str) -> Approval | None:
    """A newer card took this one's place in a chat thread: pending -> superseded, nothing runs."""
    approval = db.session.get(Approval, approval_id)
    if approval is None or not won(
        sa.update(Approval)
        .where(Approval.id == approval.id, Approval.status == "pending")
        .values(status="superseded", decided_at=utcnow())
    ):
        db.session.rollback()
        return None
    audit.record(
        "approval.decided",
        "superseded",
        tenant_id=approval.tenant_id,
        user_id=approval.user_id,
        approval_id=approval.id,
        detail=approval.action,
        channel=channel,
    )
    db.session.commit()
    db.session.refresh(approval)
    return approval


def expire(approval: Approval, channel: str = "system") -> bool:
    """Mark a pending approval past its time as expired (conditionally)."""
    now = utcnow()
    changed = won(
        sa.update(Approval)
        .where(Approval.id == approval.id, Approval.status == "pending", Approval.expires_at <= now)
        .values(status="expired", decided_at=now)
    )
    if changed:
        audit.record(
            "approval.decided",
            "expired",
            tenant_id=approval.tenant_id,
            user_id=approval.user_id,
            approval_id=approval.id,
            detail=approval.action,
            channel=channel,
        )
    db.session.commit()
    db.session.refresh(approval)
    return changed


def due_for_expiry(conversation_id: int | None = None) -> list[Approval]:
    """Pending approvals past their time (in one conversation, or all)."""
    query = sa.select(Approval).where(Approval.status == "pending", Approval.expires_at <= utcnow())
    if conversation_id is not None:
        query = query.where(Approval.conversation_id == conversation_id)
    return list(db.session.scalars(query))


def mark_interrupted(older_than_seconds: int) -> list[Approval]:
    """Approvals claimed but never finished (their process died): end them `interrupted`.
    They are never run again."""
    cutoff = utcnow() - timedelta(seconds=older_than_seconds)
    stuck = list(db.session.scalars(sa.select(Approval).where(Approval.status == "running", Approval.claimed_at <= cutoff)))
    ended = []
    for approval in stuck:
        if won(
            sa.update(Approval)
            .where(Approval.id == approval.id, Approval.status == "running")
            .values(status="interrupted", decided_at=utcnow())
        ):
            audit.record(
                "approval.decided",
                "interrupted",
                tenant_id=approval.tenant_id,
                user_id=approval.user_id,
                approval_id=approval.id,
                detail=approval.action,
                channel="system",
            )
            ended.append(approval)
    db.session.commit()
    for approval in ended:
        db.session.refresh(approval)
    return ended


def pending_for(user: User) -> list[Approval]:
    """The person's own pending approvals, newest first."""
    return list(
        db.session.scalars(
            sa.select(Approval)
            .where(Approval.user_id == user.id, Approval.status == "pending")
            .order_by(Approval.created_at.desc())
        )
    )
