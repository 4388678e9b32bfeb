"""The model's Markdown, shown safely: HTML for the browser (CommonMark with raw HTML off, then an
allow-list sanitizer), Slack mrkdwn and plain text for chat connectors. Nothing leaves by being
shown: an image is never loaded (a link labelled with its host), every link names its real host,
and only http(s) and mailto links stay links.

The parts: app.markdown.safety (which links and tags may stay), app.markdown.browser (HTML, also
while a reply streams) and app.markdown.chat (Slack mrkdwn, plain text)."""

from __future__ import annotations

from app.markdown.browser import Live, blocks_of, to_html
from app.markdown.chat import to_mrkdwn, to_plain
from app.markdown.safety import Outbound, outbound, sanitize

__all__ = ["Live", "Outbound", "blocks_of", "outbound", "sanitize", "to_html", "to_mrkdwn", "to_plain"]
