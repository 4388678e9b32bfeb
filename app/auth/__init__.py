"""Sign-in, sign-out, personal access tokens, and who is asking."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, flash, g, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Email

from app.copilot.approvals import Actor
from app.extensions import db, limiter, login
from app.models import ApiToken, User

bp = Blueprint("auth", __name__)

login.login_message = "Please sign in."


@login.user_loader
def load_user(user_id: str) -> User | None:
    return db.session.get(User, int(user_id))


class LoginForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Email()])
    password = PasswordField("Password", validators=[DataRequired()])


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit("10 per minute", methods=["POST"])
def login_page() -> Any:
    """Show the sign-in form; sign in and start a fresh session on success."""
    form = LoginForm(formdata=request.form)  # a form post only: Flask-WTF would also read JSON, and fail on a non-object
    if form.validate_on_submit():
        user = db.session.scalar(sa.select(User).where(User.email == form.email.data.strip().lower()))
        if user is not None and user.check_password(form.password.data):
            session.clear()
            login_user(user)
            # Card tokens are bound to this id: a new sign-in invalidates the old cards' tokens.
            session["sid"] = secrets.token_urlsafe(18)
            target = request.args.get("next", "")
            if not target.startswith("/") or target.startswith("//"):
                target = url_for("web.index")
            return redirect(target)
        flash("That email and password do not match.", "error")
    return render_template("auth/login.html", form=form)


login.login_view = "auth.login_page"


@bp.post("/logout")
@login_required
def logout() -> Any:
    """Sign out; every card token of this session stops working."""
    logout_user()
    session.clear()
    return redirect(url_for("auth.login_page"))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user: User, name: str = "", toolsets: str = "") -> str:
    """A new personal access token for the API and MCP; only its hash is kept."""
    token = "cs_" + secrets.token_urlsafe(32)
    db.session.add(ApiToken(user_id=user.id, name=name, token_hash=hash_token(token), toolsets=toolsets))
    db.session.commit()
    return token


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
    """The live token row for a presented token (compared by its hash)."""
    return db.session.scalar(
        sa.select(ApiToken).where(ApiToken.token_hash == hash_token(token), ApiToken.revoked.is_(False))
    )


def current_actor(channel: str = "web") -> Actor:
    """The person asking and the session their card tokens are bound to."""
    token = g.get("api_token")
    if token is not None:
        return Actor(user=token.user, binding=f"pat:{token.id}", channel="api")
    if not current_user.is_authenticated or "sid" not in session:
        abort(401)
    user = db.session.get(User, current_user.id)
    assert user is not None
    return Actor(user=user, binding=f"web:{session['sid']}", channel=channel)
