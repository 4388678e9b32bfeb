"""What may leave the page by being shown: the only links kept (http(s) with a plain host, and
mailto), each rebuilt so the host shown is the host the browser goes to; and the sanitizer's
allow-list, the last word on the HTML."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import nh3

# A host as a browser reads it after markdown-it's normalisation (IDNA to punycode, the rest
# percent-encoded): letters, digits, dots and dashes, or an IPv6 literal. Anything else (a "%",
# a backslash) could be read one way here and another way by the browser: no link.
HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]+")
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+")
# A mailbox as shown is the one a mail client writes to: no "%", which a client decodes
# (`attacker%40evil.example%2Csupport@good.example` is two addresses, one of them hidden).
MAILBOX = re.compile(r"[A-Za-z0-9.!#$&'*+/=^_`{|}~-]+@[A-Za-z0-9.-]+")
REL = "noopener noreferrer nofollow"


TAGS = {
    *("p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a"),
    *("h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span", "div", "button"),
}
ATTRIBUTES = {
    "a": {"href", "class"},
    "ol": {"start"},
    **{tag: {"class"} for tag in ("code", "div", "span", "button", "th", "td", "h2", "h3", "h4", "h5", "h6")},
}


@dataclass(frozen=True)
class Outbound:
    """Where a link really goes: the URL rebuilt from its parts (no user info), and the host shown."""

    href: str
    host: str


def ipv4(host: str) -> str | None:
    """The address a browser goes to for a host that ends in a number, as WHATWG's URL parser reads
    it ("2130706433", "0x7f.1" and "0177.0.0.1" are all 127.0.0.1); None for a name. ValueError
    for a number a browser refuses ("1.2.3.256")."""
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if not _NUMBER.fullmatch(labels[-1]):
        return None
    if len(labels) > 4 or not all(_NUMBER.fullmatch(label) for label in labels):
        raise ValueError(host)
    *head, last = [
        int(x[2:] or "0", 16) if x.startswith("0x") else int(x, 8 if len(x) > 1 and x[0] == "0" else 10) for x in labels
    ]
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise ValueError(host)
    value = sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def outbound(url: str) -> Outbound | None:
    """The link as it may be shown, or None: only http(s) with a plain host, and mailto. The URL is
    rebuilt from the parts read here, so the host shown is the host the browser goes to."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme == "mailto":
            return Outbound(f"mailto:{parts.path}", parts.path) if MAILBOX.fullmatch(parts.path) else None
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number, a broken IPv6 literal
        return None
    if scheme not in ("http", "https") or not host or not HOST.fullmatch(host):
        return None
    if ":" not in host:
        try:
            host = ipv4(host) or host
        except ValueError:  # a number no browser takes for an address: no link
            return None
    shown = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    href = urlunsplit((scheme, shown, parts.path, parts.query, parts.fragment))
    return Outbound(href, shown) if _parsed_by_sanitizer(href) else None


def _parsed_by_sanitizer(href: str) -> bool:
    """Whether the sanitizer's own URL parser (ammonia's, WHATWG's rules) takes the href. It
    refuses a host whose punycode is no IDNA label (`[x](http://¸)` becomes `http://xn--vba`) and
    strips such an href: shown beside a link that goes nowhere, its host would name no real host."""
    kept = nh3.clean(
        f'<a href="{html.escape(href)}"></a>',
        tags={"a"},
        attributes={"a": {"href"}},
        url_schemes={"http", "https"},
        link_rel=None,
    )
    return "href=" in kept


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """A last word on links: an href stays only in the form the renderer writes."""
    if tag == "a" and attribute == "href":
        target = outbound(value)
        return value if target is not None and target.href == value else None
    return value


def sanitize(html: str) -> str:
    """An allow-list: the tags and attributes the renderer writes, nothing else (no src, no style,
    no event handler); every link opens in a new tab with rel noopener noreferrer nofollow."""
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        attribute_filter=_keep_attribute,
        url_schemes={"http", "https", "mailto"},
        link_rel=REL,
        strip_comments=True,
        # A button is only ever the code's Copy button: never a submit, whatever the HTML said.
        set_tag_attribute_values={"a": {"target": "_blank"}, "button": {"type": "button"}},
    )
