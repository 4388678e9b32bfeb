"""The template filters the browser's pages use on words someone else wrote: the model's Markdown,
hidden characters shown or removed."""

from __future__ import annotations

from markupsafe import Markup

from app.copilot.hidden import removed, shown
from app.markdown import to_html
from app.web.blueprint import bp


@bp.app_template_filter("markdown")
def markdown(text: str) -> Markup:
    """The model's Markdown as sanitized HTML (app.markdown): for assistant messages only."""
    return Markup(to_html(text))  # noqa: S704  (sanitized by an allow-list)


@bp.app_template_filter("visible")
def visible(text: str) -> str:
    """Words someone else may have written outside Markdown (a title an agent's first message made,
    a message, a search echoed) with their hidden characters shown as ⟨U+XXXX⟩ (still escaped)."""
    return shown(text)


@bp.app_template_filter("editable")
def editable(text: str) -> str:
    """Such words as the value of a field the person edits and sends back: without the hidden
    characters (a marker would be sent back as text; the characters would turn the field around)."""
    return removed(text)
