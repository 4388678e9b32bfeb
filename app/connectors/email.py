"""Email: an inbound-mail webhook (JSON, HMAC-signed by the provider over a timestamp and the body)
and replies over SMTP that keep the thread (In-Reply-To / References).

A From: header proves nothing. An email is from its person only when the provider's authentication
verdict (SPF/DKIM/DMARC, inside the signed body) passes for the From's domain (sender_problem()); one
that does not, or has no verdict while EMAIL_REQUIRE_AUTH is on, reaches nobody and is answered by
nobody (receive.receive). A reply answers a card only when it also carries what only the card's own
email holds: its Message-ID, `<card.{HMAC(SECRET_KEY, approval id)}@{MAIL_FROM's domain}>`, in
In-Reply-To or References. Anything less is an ordinary message (DESIGN §3.3)."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import getaddresses, make_msgid, parseaddr
from functools import cache
from typing import Any

from flask import Request, current_app
from publicsuffixlist import PublicSuffixList

from app.connectors.base import Connector, Inbound, check_signature
from app.copilot.hidden import shown
from app.mail import smtp_send
from app.models import Approval, ConnectorThread

ADDRESS = re.compile(r"[^\s<>@]{1,64}@[^\s<>@]{1,255}")
MESSAGE_IDS = re.compile(r"<([^<>\s]+)>")
RESULT = re.compile(r"\s*([a-z0-9-]+)\s*=\s*([a-z]+)(?=\s|$)", re.IGNORECASE)
PROPERTY = re.compile(r'(?<![^\s])([a-z0-9._-]+)\s*=\s*((?:"(?:[^"\\]|\\.)*"|[^\s"])+)', re.IGNORECASE)
# Authentication-Results as tokens: a quoted string, a (comment), a run of plain text, or one
# character none of those took (";", or a quote or parenthesis left open, nested or stray).
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\((?:[^()\\]|\\.)*\)|[^"();]+|.', re.DOTALL)
# Which property of each method's result names the domain it vouches for (RFC 8601 §2.7).
IDENTITY = {"dmarc": ("header.from",), "dkim": ("header.d", "header.i"), "spf": ("smtp.mailfrom", "smtp.helo")}
RESULTS_MAX = 8000  # one Authentication-Results header is a few hundred characters
CARD_SALT = "countersign.email-card:"


class Email(Connector):
    """Email in through a provider's signed inbound webhook, out by SMTP; a reply answers the card its Message-ID names."""

    name = "email"
    path = "/email/inbound"

    def verify(self, request: Request) -> None:
        """X-Countersign-Timestamp: <unix seconds>, within five minutes, and X-Countersign-Signature:
        sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with EMAIL_WEBHOOK_SECRET>."""
        secret = current_app.config["EMAIL_WEBHOOK_SECRET"] or ""
        stamp = request.headers.get("X-Countersign-Timestamp", "")
        given = request.headers.get("X-Countersign-Signature", "")
        check_signature(secret, stamp, given, f"{stamp}.".encode() + request.get_data(), "sha256")

    def parse(self, payload: dict[str, Any]) -> Inbound | None:
        """The provider's JSON for one received email (parse())."""
        return parse(payload)

    def send(self, thread: ConnectorThread, text: str) -> None:
        smtp_send(_message(thread, text, make_msgid(domain=_domain())))

    def send_card(self, thread: ConnectorThread, approval: Approval, text: str) -> tuple[str, str] | None:
        """The card's email carries its own Message-ID: a reply to it is the proof (answers()).
        An email cannot be edited: it is not kept for its outcome."""
        smtp_send(_message(thread, text, card_message_id(approval.id)))
        return None

    def link_code(self, inbound: Inbound) -> str | None:
        """An address is linked by the link mailed to it (app.auth.links), never by a code in a mail."""
        return None

    def answers(self, inbound: Inbound, approval: Approval) -> bool:
        """A reply to this card's own email, from a sender the provider proved."""
        if inbound.unproven:
            return False  # (receive.receive refuses such mail before this; only a second look)
        local_parts = {found.partition("@")[0].lower() for found in MESSAGE_IDS.findall(inbound.refs)}
        wanted = [f"card.{card_token(approval.id, key)}" for key in _keys()]
        return any(hmac.compare_digest(part, want) for part in local_parts for want in wanted)


def _message(thread: ConnectorThread, text: str, message_id: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = current_app.config["MAIL_FROM"]
    message["To"] = thread.address
    subject = " ".join((thread.subject or "Countersign").split())  # no CR/LF reaches a header
    message["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    message["Message-ID"] = message_id
    message["In-Reply-To"] = thread.thread_key
    message["References"] = thread.thread_key
    message.set_content(shown(text))  # text/plain: nothing in it is markup; hidden characters as ⟨U+XXXX⟩ (app/copilot/hidden.py)
    return message


def _keys() -> list[str]:
    return [current_app.config["SECRET_KEY"], *current_app.config.get("SECRET_KEY_FALLBACKS", [])]


def _domain() -> str:
    return parseaddr(current_app.config["MAIL_FROM"])[1].rpartition("@")[2] or "countersign.invalid"


def card_token(approval_id: str, key: str) -> str:
    """The card's unguessable handle: only its email, sent to its person, carries it."""
    return hmac.new(key.encode(), (CARD_SALT + approval_id).encode(), hashlib.sha256).hexdigest()[:32]


def card_message_id(approval_id: str) -> str:
    return f"<card.{card_token(approval_id, current_app.config['SECRET_KEY'])}@{_domain()}>"


@dataclass(frozen=True)
class Verdict:
    """One authentication result from the provider: its method, its result, and the domain it
    vouches for ("" when the provider named none)."""

    method: str
    result: str
    domain: str = ""


UNREADABLE = Verdict("authentication", "unreadable")
UNNAMED = "<no domain>"  # a domain property with no domain in it: aligned with nothing


def sender_problem(mail: dict[str, Any], address: str) -> str:
    """Why the provider's verdict does not prove this From address ("" when it does). No verdict at
    all is a problem while EMAIL_REQUIRE_AUTH is on (the default); off, it is none, and a reply's
    card Message-ID is then its only proof."""
    found = verdicts(mail)
    if found is None:
        return "no authentication verdict" if current_app.config["EMAIL_REQUIRE_AUTH"] else ""
    return judge(found, _norm(address.rpartition("@")[2]))


def verdicts(mail: dict[str, Any]) -> list[list[Verdict]] | None:
    """The provider's verdicts, one list per form it gave them in: "auth": {"spf", "dkim", "dmarc"}
    (results only, no domain) and "authentication_results" (its own receiving server's
    Authentication-Results header, RFC 8601: a string or a list of them). None when it gave neither."""
    auth, results = mail.get("auth"), mail.get("authentication_results")
    if auth is None and results is None:
        return None
    found: list[list[Verdict]] = []
    if auth is not None:
        given = [(m, auth[m]) for m in IDENTITY if m in auth] if isinstance(auth, dict) else []
        found.append([Verdict(m, str(result).strip().lower()[:40]) for m, result in given] or [UNREADABLE])
    if results is not None:
        found.append(_from_results(results))
    return found


def judge(sources: list[list[Verdict]], domain: str) -> str:
    """Each form the provider gave must prove the From's domain on its own, and the first that does not
    is the reason: two readings of one message that disagree prove nothing, so a pass in one never
    covers for a failing or unaligned result in the other."""
    return next((problem for problem in (_judge_one(found, domain) for found in sources) if problem), "")


def _judge_one(found: list[Verdict], domain: str) -> str:
    """A DMARC verdict, where given, decides: it is about the From's domain by definition, so it must
    be a pass, and where it names its domain, name the From's (another means the provider read
    another From). Without one, every SPF and DKIM verdict must pass, and one must name the From's
    domain or a parent of it: a pass that names no domain vouches for nothing (it may be for the
    forger's own domain), so the "auth" form, which names none, proves a sender only by dmarc=pass.
    The domain an SPF or DKIM pass names must be a registrable one (registrable()): anyone may
    send from under a public suffix, so a pass for `com` aligns with nobody."""
    if UNREADABLE in found:
        return "unreadable authentication verdict"
    dmarc = [v for v in found if v.method == "dmarc"]
    for verdict in dmarc or found:
        if verdict.result != "pass":
            return f"{verdict.method}={verdict.result}"
        if verdict.method == "dmarc" and verdict.domain and verdict.domain != domain:
            return f"dmarc=pass for {verdict.domain}, not {domain}"
    if dmarc or any(v.domain and registrable(v.domain) and _aligned(v.domain, domain) for v in found):
        return ""
    return f"no passing verdict for {domain}"


@cache
def _suffixes() -> PublicSuffixList:
    """The Public Suffix List the package ships (read from its own file: nothing is fetched)."""
    return PublicSuffixList()


def registrable(domain: str) -> bool:
    """Whether a domain is one somebody can register (or under one): a public suffix (`com`,
    `co.uk`, `github.io`) is everyone's, so a pass for it vouches for no sender under it. A
    name the list does not know is taken as a suffix of its own (the list's "*" rule)."""
    return _suffixes().privatesuffix(domain) is not None


def _aligned(vouched: str, domain: str) -> bool:
    """The From's domain is the vouched one or under it: whoever signs for a domain holds its DNS,
    and so its subdomains'. (A signature for a subdomain does not vouch for its parent.)"""
    return domain == vouched or domain.endswith("." + vouched)


def _from_results(results: Any) -> list[Verdict]:
    """Each `; method=result ptype.property=value …` of the header(s); other methods (arc, iprev …)
    are not about the sender and are skipped. Unreadable: anything that hides part of the text."""
    if isinstance(results, list) and all(isinstance(r, str) for r in results):
        results = ";".join(results)
    parts = _segments(results) if isinstance(results, str) and len(results) <= RESULTS_MAX else None
    found = [v for v in map(_resinfo, parts or []) if v is not None]
    return found or [UNREADABLE]


def _segments(text: str) -> list[str] | None:
    """Split on ";" outside quoted strings, without (comments); None when a quote or comment is
    left open or nested: nothing it would hide may count, or go unseen."""
    parts: list[str] = []
    current: list[str] = []
    for token in (found.group() for found in TOKEN.finditer(text)):  # lazily: stop at the first open one
        if token == ";":
            parts.append("".join(current))
            current = []
        elif token in ('"', "(", ")"):
            return None
        else:
            current.append(" " if token.startswith("(") else token)  # a comment is a space
    return [*parts, "".join(current)]


def _resinfo(part: str) -> Verdict | None:
    """`method=result` and the domain its identity property names (dkim: header.d, header.i; spf:
    smtp.mailfrom, smtp.helo; dmarc: header.from)."""
    head = RESULT.match(part)
    if head is None or head.group(1).lower() not in IDENTITY:
        return None
    method = head.group(1).lower()
    properties = {name.lower(): value for name, value in PROPERTY.findall(part[head.end() :])}
    named = [properties[key] for key in IDENTITY[method] if key in properties]
    return Verdict(method, head.group(2).lower(), _named_domain(named[0]) if named else "")


def _named_domain(value: str) -> str:
    """The domain a property names: after its last "@" (an address), else the whole (a domain)."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return _norm(value.rpartition("@")[2]) or UNNAMED


def _norm(domain: str) -> str:
    """Compared as written, case-insensitively, without a final dot (no IDNA mapping: an
    internationalised domain must be named the same way in the verdict and in From)."""
    return domain.strip().lower().rstrip(".")


TEXT_FIELDS = ("from", "to", "subject", "text", "message_id", "in_reply_to", "references")


def parse(mail: dict[str, Any]) -> Inbound | None:
    """One sender address, or none. The thread is the first Message-ID of References, else
    In-Reply-To, else this message's; the delivery is this Message-ID (else the body's digest).
    A field that should be text and is not (an object, a list, a number) is not a provider's mail:
    none (before, `{"from": {...}}` became text and a reply went to a garbage address)."""
    if any(mail.get(k) is not None and not isinstance(mail[k], str) for k in TEXT_FIELDS):
        return None
    senders = [a.strip().lower() for _, a in getaddresses([str(mail.get("from") or "")]) if "@" in a]
    if len(senders) != 1 or not ADDRESS.fullmatch(senders[0]):
        return None
    address = senders[0]
    message_id = str(mail.get("message_id") or "")
    in_reply_to = str(mail.get("in_reply_to") or "")
    references = str(mail.get("references") or "").split()
    root = references[0] if references else (in_reply_to or message_id)
    if not root or len(root) > 500:
        return None
    text = str(mail.get("text") or "")
    subject = " ".join(str(mail.get("subject") or "").split())[:300]  # no CR/LF reaches a header
    digest = hashlib.sha256("\n".join([address, root, subject, text]).encode("utf-8", "surrogatepass")).hexdigest()
    return Inbound(
        connector="email",
        thread_key=root,
        sender=address,
        text=text,
        event_id=message_id or f"sha256:{digest}",
        has_files=bool(mail.get("attachments")),
        address=address,
        subject=subject,
        refs=" ".join([in_reply_to, *references]),
        unproven=sender_problem(mail, address),
    )
