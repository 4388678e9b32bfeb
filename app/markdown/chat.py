"""The model's Markdown for chat connectors: Slack mrkdwn and plain text (email, Telegram), with
every link's real host or URL."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from app.copilot.hidden import shown
from app.markdown.browser import md_parser
from app.markdown.safety import Outbound, outbound

if TYPE_CHECKING:  # markdown-it is imported with the first rendering, not at the app's start (P4)
    from markdown_it.token import Token


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
                out.append(self._wrap(opened, inner, nested=_in_link(stack)))
            elif kind == "text":  # (shown again: a character reference or a %-escape decodes to any character)
                out.append(self.escape(shown(token.content)))
            elif kind == "code_inline":
                out.append(self.code(self.escape(token.content)))
            elif kind in ("softbreak", "hardbreak"):  # (in a link's text a space: a quote's "> " must not land in it)
                out.append(" " if _in_link(stack) else "\n")
            elif kind == "image":
                target = outbound(str(token.attrGet("src") or ""))
                seen = target if target and not target.href.startswith("mailto:") else None
                # In a link's text, an image is its words alone: no link inside the link.
                out.append(self.escape(f"image: {seen.host}") if seen and _in_link(stack) else self.image(seen))
        return "".join(out)

    def _wrap(self, opened: Token, inner: str, nested: bool = False) -> str:
        if opened.type == "strong_open":
            return self.bold(inner)
        if opened.type == "em_open":
            return self.italic(inner)
        if opened.type == "s_open":
            return self.strike(inner)
        if opened.type == "link_open":
            auto = opened.markup == "autolink"
            target = outbound(str(opened.attrGet("href") or ""))
            if target is None or nested:  # (a link in a link's text, an autolink: its text alone)
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


def _in_link(stack: list[tuple[str, list[str], Token]]) -> bool:
    return any(kind == "link_open" for kind, _, _ in stack)


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
    return _Chat().blocks(md_parser().parse(shown(text)))


def to_mrkdwn(text: str) -> str:
    """The model's Markdown as Slack mrkdwn, escaped."""
    return _Slack().blocks(md_parser().parse(shown(text)))
