"""The model's Markdown as HTML for the browser: CommonMark with raw HTML off, rendered by rules that
keep only safe links and load no image, then sanitized; and a reply rendered as it streams."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from app.copilot.hidden import shown
from app.markdown.safety import Outbound, outbound, sanitize

if TYPE_CHECKING:  # markdown-it is imported with the first rendering, not at the app's start (P4)
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


LANGUAGE = re.compile(r"[^A-Za-z0-9_+#.-]")


def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(["table", "strikethrough"])
    # Every link and image reaches the renderer, which decides (a javascript: link keeps its text).
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    close = _closing(tokens, idx)
    auto = token.markup == "autolink"
    if env.get("inside_link"):
        # A link in a link's text (markdown-it lets an autolink be one) is its text alone: nested,
        # the HTML parser would split the outer link and leave its host unsaid (or its <a> open).
        close.meta = {"target": None, "auto": auto}
        return "&lt;" if auto else ""
    target = outbound(str(token.attrGet("href") or ""))
    # An autolink whose text is not where it goes (`<http://bank.example@evil.example/>`) names its host too.
    said = tokens[idx + 1].content if idx + 1 < len(tokens) and tokens[idx + 1].type == "text" else ""
    close.meta = {"target": target, "auto": auto, "labelled": not auto or target is None or said != target.href}
    if target is None:
        return "&lt;" if auto else ""
    env["inside_link"] = True
    return f'<a href="{_escape(target.href)}">'


def _closing(tokens: Sequence[Token], idx: int) -> Token:
    """The link_close of the link that opens at idx (the first one after it may close a link
    inside its text)."""
    depth = 0
    for token in tokens[idx:]:
        depth += {"link_open": 1, "link_close": -1}.get(token.type, 0)
        if depth == 0:
            return token
    raise ValueError("a link_open without its link_close")


def _link_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    meta = tokens[idx].meta or {}
    target: Outbound | None = meta.get("target")
    if target is None:
        return "&gt;" if meta.get("auto") else ""
    env["inside_link"] = False
    host = f' <span class="link-host">({_escape(target.host)})</span>' if meta.get("labelled", True) else ""
    return f"</a>{host}"


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    target = outbound(str(tokens[idx].attrGet("src") or ""))
    if target is None or target.href.startswith("mailto:"):
        return '<span class="image-link">image (not shown)</span>'
    if env.get("inside_link"):  # (its own link, nested, would split the one around it)
        return f'<span class="image-link">image: {_escape(target.host)}</span>'
    return f'<a class="image-link" href="{_escape(target.href)}">image: {_escape(target.host)}</a>'


def _text(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """Words, with what a character reference or an autolink's %-escape decoded to shown too
    (`&#x202E;` is the bidi override itself once parsed: shown() before the parse never saw it)."""
    return _escape(shown(tokens[idx].content))


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
    "text": _text,
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
def md_parser() -> MarkdownIt:
    """The parser with this module's renderers, made at the first rendering (not at the app's start)."""
    md = _parser()
    for name, rule in RULES.items():
        md.add_render_rule(name, rule)
    return md


@lru_cache(maxsize=256)
def to_html(text: str) -> str:
    """The model's Markdown as safe HTML (also a partial text, mid-stream: always well-formed).
    Cached: a chat page renders every reply of the conversation each time it is shown."""
    return sanitize(md_parser().render(shown(text)))


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
