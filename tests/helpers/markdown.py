"""The HTML the Markdown renders, parsed as a browser's parser reads it."""

from __future__ import annotations

from html.parser import HTMLParser


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's parser reads them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def words(self) -> str:
        return "".join(self.text)


class Links(HTMLParser):
    """Each link as a browser reads the HTML: its attributes, its text, whether it opened inside
    another link, and the text that follows it up to the next tag that is not the host label."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, object]] = []
        self.open: dict[str, object] | None = None
        self.after: dict[str, object] | None = None  # the link just closed, reading its label
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "span" and self.after is not None and dict(attrs).get("class") == "link-host":
            self.after["label_open"] = True
            return
        self.after = None
        if tag == "a":
            link = {"attrs": dict(attrs), "text": "", "nested": self.open is not None, "label": None}
            self.links.append(link)
            self.open = link

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self.open is not None:
            self.after, self.open = self.open, None
        elif tag == "span" and self.after is not None and self.after.get("label_open"):
            self.after["label_open"] = False
            self.after = None

    def handle_data(self, data: str) -> None:
        if self.open is not None:
            self.open["text"] = str(self.open["text"]) + data
        if self.after is not None and self.after.get("label_open"):
            self.after["label"] = str(self.after["label"] or "") + data
        elif self.after is not None and data.strip():
            self.after = None  # words, not the label
