"""The person's settings page for their linked channels (app.auth.links): link Telegram or Slack
with a one-time code sent from there and confirmed here, link an email address with a mailed link,
unlink any of them. Every answer is no-store: a code is shown once, to this person only."""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

from flask import current_app, flash, make_response, redirect, render_template, request, url_for
from flask_login import login_required
from wtforms.validators import Email, ValidationError

from app.auth import current_actor, links
from app.errors import CountersignError, NotFound, WrongPerson
from app.extensions import limit_per_person_and_address
from app.mail import smtp_send
from app.status import CardsTo
from app.web.blueprint import bp

CARDS_WORDS = {CardsTo.AGENTS: "those agents ask for", CardsTo.ALL: "all of them", CardsTo.OFF: "none"}


@bp.get("/settings/channels")
@login_required
def channels() -> Any:
    """The person's linked accounts, any account that sent their code and waits for their yes,
    and a way to link each channel."""
    return _page()


@bp.get("/settings/channels/waiting")
@login_required
def channels_waiting() -> Any:
    """The part of the page that waits for a code to come back from the chat service (htmx polls
    it while a code is out): the accounts that sent one, to confirm."""
    user = current_actor().user
    response = make_response(
        render_template("settings/_waiting.html", waiting=links.waiting(user), outstanding=links.outstanding(user))
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def _page(code: str = "", connector: str = "", error: str = "", status: int = 200) -> Any:
    user = current_actor().user
    bot = current_app.config["TELEGRAM_BOT_USERNAME"]
    deep_link = f"https://t.me/{bot}?start={code}" if code and connector == "telegram" and bot else ""
    page = render_template(
        "settings/channels.html",
        linked=links.links_of(user),
        modes=dict((i.id, m) for i, m in links.modes(user.id)),
        cards_words=CARDS_WORDS,
        waiting=links.waiting(user),
        outstanding=links.outstanding(user),
        code=code,
        connector=connector,
        deep_link=deep_link,
        ttl_minutes=max(1, current_app.config["LINK_CODE_TTL"] // 60),
        mail_ready=bool(current_app.config.get("SMTP_URL")),
        error=error,
    )
    response = make_response(page, status)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/settings/channels/<any(telegram, slack):connector>")
@login_required
@limit_per_person_and_address("ANSWERS")
def channel_code(connector: str) -> Any:
    """A fresh code to send from Telegram or Slack, shown once on the page."""
    return _page(code=links.new_code(current_actor().user, connector), connector=connector)


@bp.post("/settings/channels/email")
@login_required
@limit_per_person_and_address("ANSWERS")
def channel_email() -> Any:
    """Mail a link to the address; opening it signed in as this person links the address."""
    user = current_actor().user
    address = request.form.get("address", "").strip().lower()
    if not current_app.config.get("SMTP_URL"):
        return _page(error="This server sends no mail (SMTP_URL is not set), so an address cannot be linked here.", status=409)
    try:
        Email()(None, _Field(address))  # type: ignore[arg-type]
    except ValidationError:
        return _page(error="That is not an email address.", status=400)
    code = links.new_code(user, "email", address)
    link = current_app.config["PUBLIC_URL"].rstrip("/") + url_for("web.channel_email_link", code=code)
    smtp_send(_confirmation(user.email, address, link))
    flash(
        f"We sent a link to {address}. Open it here, signed in, within {current_app.config['LINK_CODE_TTL'] // 60} minutes.",
        "info",
    )
    return redirect(url_for("web.channels"))


class _Field:
    """The least WTForms' Email validator reads."""

    def __init__(self, data: str) -> None:
        self.data = data
        self.gettext = lambda text: text


def _confirmation(who: str, address: str, link: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = current_app.config["MAIL_FROM"]
    message["To"] = address
    message["Subject"] = "Link this address to Countersign"
    message.set_content(
        f"{who} asked to link this address to their Countersign account, so that cards can reach it.\n\n"
        f"Open this link, signed in as {who}, to link it:\n{link}\n\n"
        "If that was not you, ignore this mail: nothing is linked without it."
    )
    return message


@bp.route("/settings/channels/email/<code>", methods=["GET", "POST"])
@login_required
def channel_email_link(code: str) -> Any:
    """The mailed link: GET shows what it links (nothing changes on a GET: mail scanners open
    links); the person's POST links it, if the code was made for them."""
    user = current_actor().user
    try:
        row = links.email_code(code)
        if request.method == "GET":
            if row.user_id != user.id:
                raise WrongPerson(links.OTHER_PERSON)
            return render_template("settings/email_link.html", address=row.address, code=code)
        identity = links.confirm_email(user, code)
    except CountersignError as error:
        return render_template("settings/email_link.html", error=error.message), error.status
    flash(f"Linked {identity.external_id}.", "info")
    return redirect(url_for("web.channels"))


@bp.post("/settings/channels/claims/<id:code_id>/<any(link, reject):answer>")
@login_required
@limit_per_person_and_address("ANSWERS")
def channel_claim(code_id: int, answer: str) -> Any:
    """The person's answer about the account that sent their code: theirs (link it) or not."""
    try:
        identity = links.answer_claim(current_actor().user, code_id, answer == "link")
    except CountersignError as error:
        return _page(error=error.message, status=error.status)
    flash(f"Linked {identity.connector} account {identity.external_id}." if identity else "Nothing was linked.", "info")
    return redirect(url_for("web.channels"))


@bp.post("/settings/channels/<id:identity_id>/cards")
@login_required
def channel_cards(identity_id: int) -> Any:
    """Which cards reach one of the person's linked chat accounts: agents', all, or none."""
    try:
        cards = CardsTo(request.form.get("cards", ""))
    except ValueError:
        return _page(error="Choose agents, all or off.", status=400)
    identity = links.choose(identity_id, current_actor().user.id, cards)
    if identity is None:
        raise NotFound()
    flash(f"Cards to {identity.connector} {identity.external_id}: {CARDS_WORDS[cards]}.", "info")
    return redirect(url_for("web.channels"))


@bp.post("/settings/channels/<id:identity_id>/unlink")
@login_required
def channel_unlink(identity_id: int) -> Any:
    """Unlink one of the person's accounts: its messages are from someone unknown from now on."""
    identity = links.unlink(identity_id, current_actor().user)
    flash(f"Unlinked {identity.connector} account {identity.external_id}.", "info")
    return redirect(url_for("web.channels"))
