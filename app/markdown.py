"""The model's Markdown, shown safely: HTML for the browser (CommonMark with raw HTML off, then an
allow-list sanitizer), Slack mrkdwn and plain text for chat connectors. Nothing leaves by being
shown: an image is never loaded (a link labelled with its host), every link names its real host,
and only http(s) and mailto links stay links."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import nh3

from app.copilot.hidden import shown

if TYPE_CHECKING:  # markdown-it is imported with the first rendering, not at the app's start (P4)
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# A host as a browser reads it after markdown-it's normalisation (IDNA to punycode, the rest
# percent-encoded): letters, digits, dots and dashes, or an IPv6 literal. Anything else (a "%",
# a backslash) could be read one way here and another way by the browser: no link.
HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]+")
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+")
MAILBOX = re.compile(r"[A-Za-z0-9.!#$%&'*+/=^_`{|}~-]+@[A-Za-z0-9.-]+")
LANGUAGE = re.compile(r"[^A-Za-z0-9_+#.-]")
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
    return Outbound(urlunsplit((scheme, shown, parts.path, parts.query, parts.fragment)), shown)


def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(["table", "strikethrough"])
    # Every link and image reaches the renderer, which decides (a javascript: link keeps its text).
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


# --- HTML for the browser ---------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    close = next(t for t in tokens[idx:] if t.type == "link_close")
    target = outbound(str(token.attrGet("href") or ""))
    auto = token.markup == "autolink"
    # An autolink whose text is not where it goes (`<http://bank.example@evil.example/>`) names its host too.
    said = tokens[idx + 1].content if idx + 1 < len(tokens) and tokens[idx + 1].type == "text" else ""
    close.meta = {"target": target, "auto": auto, "labelled": not auto or target is None or said != target.href}
    if target is None:
        return "&lt;" if auto else ""
    return f'<a href="{_escape(target.href)}">'


def _link_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    meta = tokens[idx].meta or {}
    target: Outbound | None = meta.get("target")
    if target is None:
        return "&gt;" if meta.get("auto") else ""
    host = f' <span class="link-host">({_escape(target.host)})</span>' if meta.get("labelled", True) else ""
    return f"</a>{host}"


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    target = outbound(str(tokens[idx].attrGet("src") or ""))
    if target is None or target.href.startswith("mailto:"):
        return '<span class="image-link">image (not shown)</span>'
    return f'<a class="image-link" href="{_escape(target.href)}">image: {_escape(target.host)}</a>'


def _code(content: str, info: str = "") -> str:
    language = LANGUAGE.sub("", info.split()[0])[:32] if info.strip() else ""
    css = f' class="language-{language}"' if language else ""
    return (
        '<div class="code-block"><button type="button" class="code-copy">Copy code</button>'
        f"<pre><code{css}>{_escape(content)}</code></pre></div>\n"
    )


def _fence(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _code(tokens[idx].content, tokens[idx].info)


def _code_block(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _code(tokens[idx].content)


def _heading(closing: bool) -> Callable[..., str]:
    """The model's headings sit under the chat's own title (h1): its # is an h2, and so on."""

    def render(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        level = min(int(tokens[idx].tag[1]) + 1, 6)
        return f"</h{level}>\n" if closing else f'<h{level} class="md-heading">'

    return render


def _cell(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """A table cell's alignment as a class: no style attribute reaches the page."""
    token = tokens[idx]
    align = str(token.attrGet("style") or "").removeprefix("text-align:")
    css = f' class="align-{align}"' if align in ("left", "center", "right") else ""
    return f"<{token.tag}{css}>"


RULES = {
    "link_open": _link_open,
    "link_close": _link_close,
    "image": _image,
    "fence": _fence,
    "code_block": _code_block,
    "heading_open": _heading(False),
    "heading_close": _heading(True),
    "th_open": _cell,
    "td_open": _cell,
}


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    """The parser with this module's renderers, made at the first rendering (not at the app's start)."""
    md = _parser()
    for name, rule in RULES.items():
        md.add_render_rule(name, rule)
    return md


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


@lru_cache(maxsize=256)
def to_html(text: str) -> str:
    """The model's Markdown as safe HTML (also a partial text, mid-stream: always well-formed).
    Cached: a chat page renders every reply of the conversation each time it is shown."""
    return sanitize(_md().render(shown(text)))


FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def blocks_of(text: str) -> list[str]:
    """The text cut at its blank lines outside code fences: pieces that render on their own."""
    pieces: list[str] = []
    lines: list[str] = []
    fence = ""
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if not fence and opened:
            fence = opened.group(1)
        elif fence and opened and opened.group(1).startswith(fence) and not line[opened.end() :].strip():
            fence = ""
        if not fence and not line.strip():
            if lines:
                pieces.append("\n".join(lines))
                lines = []
            continue
        lines.append(line)
    if lines:
        pieces.append("\n".join(lines))
    return pieces


class Live:
    """A reply shown while it streams: rendered again at every update, at a cost that stays small.
    The pieces before the last blank line no longer change and keep their HTML; only the last one
    is rendered again, and once it is long (a model can write one endless paragraph), only after
    it has grown by a quarter. The reply's end replaces all this with to_html() of the whole."""

    LONG = 2000  # characters: a last piece longer than this is rendered less often

    def __init__(self) -> None:
        self.done: dict[str, str] = {}
        self.last = 0  # length of the last piece when it was last rendered

    def html(self, text: str) -> str | None:
        """The HTML of the reply so far, or None when this update need not be shown yet."""
        pieces = blocks_of(text)
        tail = pieces.pop() if pieces else ""
        if len(tail) > self.LONG and len(tail) < self.last * 1.25 and all(p in self.done for p in pieces):
            return None
        self.last = len(tail)
        for piece in pieces:
            if piece not in self.done:
                self.done[piece] = to_html(piece)
        return "".join([*(self.done[p] for p in pieces), to_html(tail)])


# --- Chat connectors: Slack mrkdwn and plain text ---------------------------------------------------


class _Chat:
    """Walks the parsed Markdown and writes a chat platform's text. This one writes plain text:
    links as `text (url)`, images as `image: host (url)` (never fetched), code kept as typed."""

    def escape(self, text: str) -> str:
        return text

    def bold(self, text: str) -> str:
        return text

    def italic(self, text: str) -> str:
        return text

    def strike(self, text: str) -> str:
        return text

    def code(self, text: str) -> str:
        return f"`{text}`"

    def pre(self, text: str) -> str:
        return "```\n" + text.rstrip("\n") + "\n```"

    def link(self, target: Outbound, inner: str, auto: bool) -> str:
        return target.href if auto else f"{inner} ({target.href})"

    def dropped_autolink(self, raw: str) -> str:
        return self.escape(f"<{raw}>")

    def image(self, target: Outbound | None) -> str:
        return f"image: {target.host} ({target.href})" if target else "image (not shown)"

    def inline(self, tokens: list[Token]) -> str:
        out: list[str] = []
        stack: list[tuple[str, list[str], Token]] = []
        for token in tokens:
            kind = token.type
            if kind.endswith("_open"):
                stack.append((kind, out, token))
                out = []
            elif kind.endswith("_close") and stack:
                _, outer, opened = stack.pop()
                inner = "".join(out)
                out = outer
                out.append(self._wrap(opened, inner))
            elif kind == "text":
                out.append(self.escape(token.content))
            elif kind == "code_inline":
                out.append(self.code(self.escape(token.content)))
            elif kind in ("softbreak", "hardbreak"):
                out.append("\n")
            elif kind == "image":
                target = outbound(str(token.attrGet("src") or ""))
                out.append(self.image(target if target and not target.href.startswith("mailto:") else None))
        return "".join(out)

    def _wrap(self, opened: Token, inner: str) -> str:
        if opened.type == "strong_open":
            return self.bold(inner)
        if opened.type == "em_open":
            return self.italic(inner)
        if opened.type == "s_open":
            return self.strike(inner)
        if opened.type == "link_open":
            auto = opened.markup == "autolink"
            target = outbound(str(opened.attrGet("href") or ""))
            if target is None:
                return self.dropped_autolink(_unescaped(inner, self)) if auto else inner
            return self.link(target, inner, auto)
        return inner

    def blocks(self, tokens: list[Token]) -> str:
        lines: list[str] = []
        lists: list[int] = []  # per open list, its next number (0: bullets)
        quote, prefix, heading = 0, "", False
        table: list[str] | None = None
        row: list[str] = []
        for token in tokens:
            kind = token.type
            if kind in ("bullet_list_open", "ordered_list_open"):
                lists.append(int(token.attrGet("start") or 1) if kind == "ordered_list_open" else 0)
            elif kind in ("bullet_list_close", "ordered_list_close"):
                lists.pop()
                if not lists:
                    lines.append("")
            elif kind == "list_item_open":
                prefix = "  " * (len(lists) - 1) + (f"{lists[-1]}. " if lists[-1] else "• ")
                lists[-1] += 1 if lists[-1] else 0
            elif kind in ("blockquote_open", "blockquote_close"):
                quote += 1 if kind == "blockquote_open" else -1
            elif kind == "heading_open":
                heading = True
            elif kind == "table_open":
                table = []
            elif kind == "tr_close" and table is not None:
                table.append(" | ".join(row))
                row = []
            elif kind == "table_close" and table is not None:
                lines += [self.pre(self.escape("\n".join(table))), ""]
                table = None
            elif kind == "inline" and table is not None:
                row.append(_unescaped(self.inline(token.children or []), self))
            elif kind == "inline":
                text = self.inline(token.children or [])
                text, heading = (self.bold(text) if heading else text), False
                for i, line in enumerate(text.split("\n")):
                    lines.append("> " * quote + (prefix if i == 0 else " " * len(prefix)) + line)
                prefix = ""
            elif kind in ("paragraph_close", "heading_close") and not token.hidden:
                lines.append("")
            elif kind in ("fence", "code_block"):
                block = self.pre(self.escape(token.content)).split("\n")
                lines += [*("> " * quote + " " * len(prefix) + line for line in block), ""]
                prefix = ""
            elif kind == "hr":
                lines += ["———", ""]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines)).strip("\n")


def _unescaped(text: str, chat: _Chat) -> str:
    """The text of a dropped autolink, before escaping (escaped again with its brackets)."""
    if isinstance(chat, _Slack):
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text


class _Slack(_Chat):
    """Slack's mrkdwn: &, < and > escaped (so no <!channel>, no <@U…>, no link but ours); links as
    <url|text> for http(s) only, with the real host after them."""

    def escape(self, text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def bold(self, text: str) -> str:
        return f"*{text}*" if text.strip() else text

    def italic(self, text: str) -> str:
        return f"_{text}_" if text.strip() else text

    def strike(self, text: str) -> str:
        return f"~{text}~" if text.strip() else text

    def link(self, target: Outbound, inner: str, auto: bool) -> str:
        href = _slack_url(target.href)
        if auto:
            return f"<{href}>"
        return f"<{href}|{inner}> ({self.escape(target.host)})"

    def image(self, target: Outbound | None) -> str:
        return f"<{_slack_url(target.href)}|image: {self.escape(target.host)}>" if target else "image (not shown)"


def _slack_url(href: str) -> str:
    """A URL inside <…|…>: the characters that would end it, percent-encoded."""
    return href.replace("|", "%7C").replace("<", "%3C").replace(">", "%3E").replace("&", "&amp;")


def to_plain(text: str) -> str:
    """The model's Markdown as plain text (email, Telegram): readable, every link's URL in full."""
    return _Chat().blocks(_md().parse(shown(text)))


def to_mrkdwn(text: str) -> str:
    """The model's Markdown as Slack mrkdwn, escaped."""
    return _Slack().blocks(_md().parse(shown(text)))
