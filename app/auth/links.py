"""A person links their own chat accounts and email addresses (issue 28 §1), with a one-time code.

The code is made on the person's settings page and carried to the other side: sent to the bot from
Telegram (`/start <code>`, the page's t.me link) or to the Slack app in a DM, or mailed to the
address as a link. Each code is kept only as its hash, bound to the person, single-use, good for
LINK_CODE_TTL seconds, and every step is audited.

A chat account that sends a code links nothing by itself: the code could have been read over the
person's shoulder. It is *claimed* by that account, and the person sees the account on their page
and confirms it (or says it is not theirs). An account already linked to someone else is refused.
A mailed link links its address only when opened in the signed-in session of the code's person.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta

import sqlalchemy as sa
from flask import current_app

from app.copilot import audit
from app.errors import BadValues, Expired, NotFound, WrongPerson
from app.extensions import db
from app.models import ConnectorIdentity, LinkCode, User, utcnow
from app.status import CardsTo

CHATS = ("telegram", "slack")  # linked by a code the person sends from there
LINKABLE = (*CHATS, "email")  # email: by a link mailed to the address
CODE = re.compile(r"cs-[0-9a-f]{20}")
# What a chat message that carries a code looks like: the code alone, "link <code>" (a Slack DM),
# or "/start <code>" (what Telegram sends when the person opens the t.me link and presses Start).
SENT = re.compile(r"(?:/start\s+|link\s+)?(cs-[0-9a-f]{20})", re.IGNORECASE)

CLAIMED = "Got it. Go back to Countersign and confirm this account there to finish linking."
NOT_VALID = "That code is not valid: it was used already, or it ran out. Make a new one on your Countersign settings page."
TAKEN = "This account is linked to another person in Countersign. Ask an admin to remove that link first."
ALREADY = "This account is already linked to you in Countersign."
LINK_GONE = "This link was used already, or it ran out. Ask for a new one on your settings page."
OTHER_PERSON = "This link was made for another account: sign in as that person to use it."


def _audit(event: str, outcome: str, user: User | None, connector: str, detail: str = "") -> None:
    """One step of linking, in the person's audit log (a code nobody holds: the tenantless log)."""
    tenant, who = (user.tenant_id, user.id) if user is not None else (None, None)
    audit.record(f"channel.{event}", outcome, tenant_id=tenant, user_id=who, detail=detail, channel=connector)


def _refused(event: str, user: User | None, connector: str, detail: str) -> None:
    """A refused step, kept in a transaction of its own (whatever the request does next)."""
    db.session.rollback()
    _audit(event, "refused", user, connector, detail)
    db.session.commit()


def _hash(code: str) -> str:
    return hashlib.sha256(code.lower().encode()).hexdigest()


def code_in(text: str) -> str | None:
    """The code a chat message carries, when the message is nothing but one (its first line)."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    found = SENT.fullmatch(line)
    return found.group(1).lower() if found else None


def new_code(user: User, connector: str, address: str = "") -> str:
    """A fresh code for `user` to link an account of `connector` (for email, `address`); the
    person's earlier unused codes for it stop working. Returns the code itself (kept hashed)."""
    if connector not in LINKABLE:
        raise NotFound()
    now = utcnow()
    db.session.execute(
        sa.update(LinkCode)
        .where(LinkCode.user_id == user.id, LinkCode.connector == connector, LinkCode.used_at.is_(None))
        .values(used_at=now)
    )
    code = f"cs-{secrets.token_hex(10)}"
    ttl = timedelta(seconds=current_app.config["LINK_CODE_TTL"])
    db.session.add(LinkCode(code_hash=_hash(code), user_id=user.id, connector=connector, address=address, expires_at=now + ttl))
    _audit("link_code", "issued", user, connector, address)
    db.session.commit()
    return code


def _live(code: str, connector: str, lock: bool = True) -> LinkCode | None:
    """The unused, unexpired code of this connector, taken for update (one sender claims it)."""
    query = sa.select(LinkCode).where(LinkCode.code_hash == _hash(code), LinkCode.connector == connector)
    row = db.session.scalar(query.with_for_update() if lock else query)
    if row is None or row.used_at is not None or row.expires_at <= utcnow():
        return None
    return row


def _linked_to(connector: str, external_id: str) -> ConnectorIdentity | None:
    return db.session.scalar(
        sa.select(ConnectorIdentity).where(ConnectorIdentity.connector == connector, ConnectorIdentity.external_id == external_id)
    )


def claim(connector: str, sender: str, name: str, code: str) -> str:
    """A chat account (`sender`, verified by its webhook) sent `code`: it claims the code for its
    person to confirm. Returns what to tell that account. Used, expired, unknown or already
    claimed codes claim nothing; an account linked to someone else is refused. All audited."""
    row = _live(code, connector)
    if row is None or row.claimed_by:
        _refused("link_claim", None, connector, f"from {sender}: not a live code")
        return NOT_VALID
    user = row.user
    taken = _linked_to(connector, sender)
    if taken is not None:
        row.used_at = utcnow()  # sent by an account linked already: spent, the person makes a new one
        said, outcome = (ALREADY, "already") if taken.user_id == user.id else (TAKEN, "refused")
        _audit("link_claim", outcome, user, connector, f"from {sender}: linked already")
        db.session.commit()
        return said
    row.claimed_by, row.claimed_name = sender, name[:200]
    _audit("link_claim", "claimed", user, connector, f"from {sender}")
    db.session.commit()
    return CLAIMED


def waiting(user: User) -> list[LinkCode]:
    """The person's codes a chat account has claimed, waiting for them to confirm it."""
    query = sa.select(LinkCode).where(
        LinkCode.user_id == user.id, LinkCode.claimed_by != "", LinkCode.used_at.is_(None), LinkCode.expires_at > utcnow()
    )
    return list(db.session.scalars(query.order_by(LinkCode.id)))


def outstanding(user: User) -> list[LinkCode]:
    """The person's chat codes not yet sent from the chat service (the page waits for them)."""
    query = sa.select(LinkCode).where(
        LinkCode.user_id == user.id,
        LinkCode.connector.in_(CHATS),
        LinkCode.claimed_by == "",
        LinkCode.used_at.is_(None),
        LinkCode.expires_at > utcnow(),
    )
    return list(db.session.scalars(query))


def _link(user: User, connector: str, external_id: str) -> ConnectorIdentity:
    """Link the account to the person, unless it is someone else's (refused, audited)."""
    taken = _linked_to(connector, external_id)
    if taken is not None and taken.user_id != user.id:
        _refused("linked", user, connector, f"{external_id}: linked to another person")
        raise BadValues(TAKEN)
    identity = taken or ConnectorIdentity(connector=connector, external_id=external_id, user_id=user.id)
    db.session.add(identity)
    _audit("linked", "linked", user, connector, external_id)
    return identity


def answer_claim(user: User, code_id: int, yes: bool) -> ConnectorIdentity | None:
    """The person confirms that the account which sent their code is theirs (it is linked), or
    says it is not (nothing is linked). Either way the code is spent."""
    row = db.session.get(LinkCode, code_id, with_for_update=True)
    if row is None or row.user_id != user.id or not row.claimed_by:
        db.session.rollback()
        raise NotFound()
    if row.used_at is not None or row.expires_at <= utcnow():
        db.session.rollback()
        raise Expired("That code was used already, or it ran out. Make a new one.")
    row.used_at = utcnow()
    if not yes:
        _audit("link_claim", "rejected", user, row.connector, f"from {row.claimed_by}")
        db.session.commit()
        return None
    identity = _link(user, row.connector, row.claimed_by)
    db.session.commit()
    return identity


def email_code(code: str) -> LinkCode:
    """The live code of a mailed link (to show what it links before the person confirms)."""
    row = _live(code, "email", lock=False) if CODE.fullmatch(code) else None
    if row is None:
        raise Expired(LINK_GONE)
    return row


def confirm_email(user: User, code: str) -> ConnectorIdentity:
    """The mailed link, opened signed in: links its address to the person — only when it is the
    person the code was made for (anyone else links nothing, and it is audited)."""
    row = _live(code, "email") if CODE.fullmatch(code) else None
    if row is None:
        db.session.rollback()
        raise Expired(LINK_GONE)
    if row.user_id != user.id:
        _refused("linked", user, "email", "another person's link")
        raise WrongPerson(OTHER_PERSON)
    row.used_at = utcnow()
    identity = _link(user, "email", row.address.lower())
    db.session.commit()
    return identity


def links_of(user: User) -> list[ConnectorIdentity]:
    query = sa.select(ConnectorIdentity).where(ConnectorIdentity.user_id == user.id)
    return list(db.session.scalars(query.order_by(ConnectorIdentity.id)))


def tenant_links(tenant_id: int) -> list[ConnectorIdentity]:
    """Every linked account of the tenant's people, for the admin."""
    query = sa.select(ConnectorIdentity).join(User, User.id == ConnectorIdentity.user_id).where(User.tenant_id == tenant_id)
    return list(db.session.scalars(query.order_by(User.email, ConnectorIdentity.id)))


def unlink(identity_id: int, by: User, admin: bool = False) -> ConnectorIdentity:
    """Remove a linked account: the person's own, or (admin) one of a person of the admin's tenant.
    Its messages are then from someone unknown, and no card goes there."""
    identity = db.session.get(ConnectorIdentity, identity_id)
    if identity is None or (identity.user_id != by.id and not (admin and identity.user.tenant_id == by.tenant_id)):
        raise NotFound()
    whose = identity.user
    _audit(
        "unlinked", "unlinked", whose, identity.connector, identity.external_id + (f" by {by.email}" if whose.id != by.id else "")
    )
    db.session.delete(identity)
    db.session.commit()
    return identity


def modes(user_id: int) -> list[tuple[ConnectorIdentity, CardsTo]]:
    """The person's linked chat accounts, each with which cards reach it (the default filled in)."""
    chats = list(
        db.session.scalars(
            sa.select(ConnectorIdentity)
            .where(ConnectorIdentity.user_id == user_id, ConnectorIdentity.connector.in_(CHATS))
            .order_by(ConnectorIdentity.id)
        )
    )
    if any(c.cards is not None for c in chats):
        return [(c, CardsTo(c.cards or CardsTo.OFF)) for c in chats]
    return [(c, CardsTo.AGENTS if i == 0 else CardsTo.OFF) for i, c in enumerate(chats)]


def choose(identity_id: int, user_id: int, cards: CardsTo) -> ConnectorIdentity | None:
    """The person's choice for one of their linked chat accounts (the others keep theirs, their
    defaults written down, so the choice does not move the default to another account)."""
    current = modes(user_id)
    mine = next((i for i, _ in current if i.id == identity_id), None)
    if mine is None:
        return None
    for identity, mode in current:
        identity.cards = cards if identity.id == identity_id else mode
    db.session.commit()
    return mine
