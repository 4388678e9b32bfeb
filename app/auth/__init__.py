"""Sign-in, sign-out (ending the session server-side), personal access tokens with their scope
and toolsets, and who is asking."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from sqlalchemy.orm import contains_eager, joinedload
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Email

from app import copilot
from app.auth import signin
from app.copilot import audit
from app.copilot.approvals import Actor
from app.copilot.text import seconds
from app.errors import BadValues, NotFound
from app.extensions import core, db, limiter, login, won
from app.models import ROW_ID_MAX, ApiToken, Approval, User, UserSession, utcnow
from app.routing import safe_target

bp = Blueprint("auth", __name__)

login.login_message = "Please sign in."


SCOPES = ("agent", "client")


@login.user_loader
def load_user(user_id: str) -> User | None:
    """The signed-in person, only while the cookie's session row is live (one indexed read): a
    cookie copied before sign-out names an ended session and counts as signed out everywhere;
    a session older than SESSION_MAX_AGE has ended too."""
    return _live_session_user(user_id, session.get("sid"))


def _live_session_user(user_id: Any, sid: Any) -> User | None:
    given = _session_given(user_id, sid)
    return None if given is None else db.session.scalar(_SESSION_USER, given)


def _session_given(user_id: Any, sid: Any) -> dict[str, Any] | None:
    """A cookie's session as the statements below ask for it; None when it cannot name one."""
    if not isinstance(sid, str) or not isinstance(user_id, str) or not user_id.isdigit():
        return None
    since = utcnow() - timedelta(seconds=int(current_app.config["SESSION_MAX_AGE"]))
    return {"sid": sid, "since": since, "user_id": int(user_id)}


# Built once: every browser request reads its session, and every open stream checks it again.
_LIVE_SESSION = (
    UserSession.id == sa.bindparam("sid"),
    UserSession.ended_at.is_(None),
    UserSession.created_at > sa.bindparam("since"),
    User.id == sa.bindparam("user_id"),
)
_SESSION_USER = sa.select(User).join(UserSession, UserSession.user_id == User.id).where(*_LIVE_SESSION)
_SESSION_IS_LIVE = sa.select(UserSession.id).join(User, User.id == UserSession.user_id).where(*_LIVE_SESSION)


def start_session(user: User) -> None:
    """A fresh session for this sign-in: a new random id, kept server-side. Card tokens are bound
    to it, so a new sign-in invalidates the old cards' tokens."""
    session.clear()
    sid = secrets.token_urlsafe(18)
    db.session.add(UserSession(id=sid, user_id=user.id))
    db.session.commit()
    login_user(user)
    session["sid"] = sid


def end_sessions(user_id: int, sid: str | None = None) -> int:
    """End one live session of the person (or all of them): their cookies stop working at once."""
    query = sa.update(UserSession).where(UserSession.user_id == user_id, UserSession.ended_at.is_(None))
    if sid is not None:
        query = query.where(UserSession.id == sid)
    ended = db.session.execute(query.values(ended_at=utcnow()).execution_options(synchronize_session=False))
    db.session.commit()
    return int(getattr(ended, "rowcount", 0) or 0)


class LoginForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Email()])
    password = PasswordField("Password", validators=[DataRequired()])


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(
    lambda: current_app.config["RATELIMIT_SIGNIN_FAILURES_PER_ADDRESS"],
    methods=["POST"],
    deduct_when=lambda response: response.status_code != 302,  # failures only
    error_message="Too many failed sign-ins from your address.",
)
def login_page() -> Any:
    """Show the sign-in form; sign in, start a fresh session, renew the browser's device cookie and
    go to `next` (a path on this site only) on success. Failures block the address and slow the
    account down, or with the account's device cookie spend one of that device's tries (app.auth.signin)."""
    form = LoginForm(formdata=request.form)  # a form post only: Flask-WTF would also read JSON, and fail on a non-object
    if form.validate_on_submit():
        email = form.email.data.strip().lower()
        device = signin.device_try(email)  # a browser the account signed in on skips the account's wait
        wait = 0 if device else signin.seconds_to_wait(email)
        if wait:
            flash(f"Too many failed sign-ins for this account. Try again in {seconds(wait)}.", "error")
            return render_template("auth/login.html", form=form), 429, {"Retry-After": str(wait)}
        user = db.session.scalar(sa.select(User).where(User.email == email))
        if signin.password_matches(user, form.password.data) and user is not None:
            signin.succeeded(email, device)
            start_session(user)
            return signin.remember_device(redirect(safe_target(request.args.get("next")) or url_for("web.index")), email)
        signin.failed(email, device)
        flash("That email and password do not match.", "error")
    return render_template("auth/login.html", form=form)


login.login_view = "auth.login_page"


@bp.post("/logout")
@login_required
def logout() -> Any:
    """Sign out: the session ends server-side, so this cookie (and any copy of it) and every
    card token of this session stop working."""
    end_sessions(current_user.id, str(session.get("sid", "")))
    logout_user()
    session.clear()
    return redirect(url_for("auth.login_page"))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(
    user: User, name: str = "", toolsets: str = "", scope: str = "agent", by: User | None = None, channel: str = "cli"
) -> str:
    """A new personal access token for the API and MCP; only its hash is kept. Scope "agent"
    (the default) chats and calls actions but never answers a card; "client" may answer. Made
    `by` someone (an admin in the console), it is audited with who made it."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    token = "cs_" + secrets.token_urlsafe(32)
    row = ApiToken(
        user_id=user.id,
        name=name,
        token_hash=hash_token(token),
        toolsets=",".join(t.strip() for t in toolsets.split(",") if t.strip()),
        scope=scope,
    )
    db.session.add(row)
    if by is not None:
        db.session.flush()
        audit.record(
            "token.created",
            "created",
            tenant_id=user.tenant_id,
            user_id=by.id,
            detail=f"token {row.id} ({scope}, {name!r}, toolsets {row.toolsets or 'all configured'}) of {user.email}",
            channel=channel,
        )
    db.session.commit()
    return token


def known_toolsets() -> list[str]:
    """Every toolset an action of this app belongs to: what a token's toolsets may name."""
    return sorted({t for a in copilot.engine().registry.actions.values() for t in a.toolsets})


def revoke_token(token: ApiToken, by: User | None, channel: str, reason: str = "") -> bool:
    """Revoke a token (audited, with the reason given); False if it already was. It stops
    authenticating at once, so the card tokens signed for it are useless."""
    if not won(sa.update(ApiToken).where(ApiToken.id == token.id, ApiToken.revoked.is_(False)).values(revoked=True)):
        db.session.rollback()
        return False
    audit.record(
        "token.revoked",
        "revoked",
        tenant_id=token.user.tenant_id,
        user_id=by.id if by else None,
        detail=f"token {token.id} ({token.scope}, {token.name!r}) of {token.user.email}" + (f": {reason}" if reason else ""),
        channel=channel,
    )
    db.session.commit()
    db.session.refresh(token)
    return True


REASON_MAX = 500


def issue_token(by: User, person: User | None, name: str, scope: str, toolsets: list[str], channel: str) -> str:
    """A token an admin makes for a person of their own tenant (audited): no one, or a person of
    another tenant, is NotFound; an unknown scope or toolset is BadValues, naming it."""
    if person is None or person.tenant_id != by.tenant_id:
        raise NotFound()
    unknown = [t for t in toolsets if t not in known_toolsets()]
    if unknown:
        raise BadValues(f"Unknown toolset {', '.join(unknown)}.")
    if scope not in SCOPES:
        raise BadValues(f"Choose a scope: {' or '.join(SCOPES)}.")
    return create_token(person, name.strip()[:200], ",".join(dict.fromkeys(toolsets)), scope=scope, by=by, channel=channel)


def tenant_tokens(tenant_id: int, limit: int = 500) -> list[ApiToken]:
    """The tenant's tokens, newest first."""
    query = sa.select(ApiToken).join(ApiToken.user).options(contains_eager(ApiToken.user))
    return list(db.session.scalars(query.where(User.tenant_id == tenant_id).order_by(ApiToken.id.desc()).limit(limit)))


def tenant_token(by: User, token_id: int) -> ApiToken:
    """A token of the admin's tenant; another tenant's token looks like no token at all (NotFound)."""
    token = db.session.get(ApiToken, token_id) if 0 < token_id <= ROW_ID_MAX else None
    if token is None or token.user.tenant_id != by.tenant_id:
        raise NotFound()
    return token


def revoke_with_reason(token: ApiToken, by: User, reason: str, channel: str) -> bool:
    """An admin's revoke, which must say why (BadValues without a reason); False if it already was."""
    words = " ".join(reason.split())[:REASON_MAX]
    if not words:
        raise BadValues("Give a reason: it goes into the audit log.")
    return revoke_token(token, by, channel, words)


def token_toolsets(token: ApiToken) -> tuple[str, ...] | None:
    """The toolsets a token is limited to; None when made without --toolsets (the app's)."""
    names = tuple(t for t in (token.toolsets or "").split(",") if t)
    return names or None


def token_actor(token: ApiToken, channel: str) -> Actor:
    """Who acts with this token: bound to "pat:<id>", its scope and its toolsets on every route."""
    return Actor(
        user=token.user, binding=f"pat:{token.id}", channel=channel, agent=token.is_agent, toolsets=token_toolsets(token)
    )


def bearer_token() -> ApiToken | None:
    """The personal access token in Authorization: Bearer, if it is valid."""
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("bearer "):
        return None
    row = find_token(header[7:].strip())
    if row is None:
        abort(401)
    return row


def find_token(token: str) -> ApiToken | None:
    """The live token row for a presented token (compared by its hash), read with its person and
    their tenant in the same statement (every request with it acts as them, in their tenant)."""
    return db.session.scalar(_LIVE_TOKEN, {"token_hash": hash_token(token)})


_LIVE_TOKEN = (  # built once: every API request runs it
    sa.select(ApiToken)
    .where(ApiToken.token_hash == sa.bindparam("token_hash"), ApiToken.revoked.is_(False))
    .options(joinedload(ApiToken.user).joinedload(User.tenant))
)


CHANNEL_NAMES = {
    "web": "in the browser",
    "telegram": "on Telegram",
    "slack": "on Slack",
    "email": "by email",
    "mcp": "over MCP",
    "api": "through the API",
}


@bp.app_template_filter("asked_by")
def asked_by(approval: Approval) -> str:
    """Who asked for a card, in plain words for the person and admins: "Asked by an agent
    (token 'laptop') over MCP". Names a token, never a secret or a session."""
    return credential_words("Asked", approval.requested_via, approval.requested_by_agent)


def credential_words(verb: str, via: str | None, agent: bool) -> str:
    """`verb` by whom and where, from a run's or card's credential ("api:pat:3"): "Written by an
    agent (token 'laptop') through the API"; just `verb` and where for the person themselves."""
    channel, _, rest = (via or "").partition(":")
    where = CHANNEL_NAMES.get(channel, f"via {channel}" if channel else "")
    if rest.startswith("pat:") and rest[4:].isdigit():
        token = db.session.get(ApiToken, int(rest[4:]))
        who = "an agent" if agent else "the person's app"
        named = f" (token '{token.name}')" if token is not None and token.name else ""
        return f"{verb} by {who}{named} {where}".strip()
    if agent:
        return f"{verb} by an agent {where}".strip()
    return f"{verb} {where}".strip() if where else ""


def credential_check() -> Callable[[], bool]:
    """For a long request (an event stream): a check of whether the credential it came with is
    still live — its bearer token not revoked, its browser session not ended nor past
    SESSION_MAX_AGE — bound to that credential now, whatever request is current when it is asked.
    The credential is the one that let the request in: the API's bearer token when it had one
    (g.api_token), else the session. An Authorization header beside a session on a browser route
    is not its credential: a live token of anyone must not keep a signed-out session's stream open."""
    token = g.get("api_token")
    token_id = token.id if token is not None else None
    user_id, sid = session.get("_user_id"), session.get("sid")

    def live() -> bool:
        # One column of one row; a session's age is taken at each check, not once at the open.
        if token_id is not None:
            ok = core(_TOKEN_IS_LIVE, {"token_id": token_id}).scalar() is not None
        else:
            given = _session_given(user_id, sid)
            ok = given is not None and core(_SESSION_IS_LIVE, given).scalar() is not None
        db.session.rollback()
        return ok

    return live


_TOKEN_IS_LIVE = sa.select(ApiToken.id).where(ApiToken.id == sa.bindparam("token_id"), ApiToken.revoked.is_(False))


def current_actor(channel: str = "web") -> Actor:
    """The person asking and the session their card tokens are bound to."""
    token = g.get("api_token")
    if token is not None:
        return token_actor(token, "api")
    if not current_user.is_authenticated or "sid" not in session:
        abort(401)
    user = db.session.get(User, current_user.id)
    assert user is not None
    return Actor(user=user, binding=f"web:{session['sid']}", channel=channel)
