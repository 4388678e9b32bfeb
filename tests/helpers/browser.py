"""The browser tests' steps (the fixtures, `browser`, `page`, `server` and `shots`, are in
tests/conftest.py): sign in through the form, open a chat, type a message."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import CSRF  # a page's CSRF token, as htmx sends it

# Debian's chromium-headless-shell (Chromium's headless build, the one Playwright itself runs
# headless) when installed: the full browser in its headless mode took about a second more of CPU
# for each test's context (1.2 s against 0.16 s here). Otherwise Debian's chromium.
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium-headless-shell") or shutil.which("chromium") or "chromium"
# COUNTERSIGN_SCREENSHOTS=1 refreshes the README's pictures; otherwise they go to a temp dir.
DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
# ms: the limit for anything the page must do. Playwright's own defaults (30 s for actions, 5 s
# for expect) are about a quick machine; a loaded one may take seconds to render, so a wait that
# runs out means a broken page, not a slow one.
LONG = 30_000


def sign_in(page, server, email="alice@example.com"):
    """Sign in through the form, with the demo password."""
    page.goto(f"{server}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()


def sign_in_and_open_chat(page, server, email="alice@example.com"):
    """Signed in, on a new conversation's page. The sign-in form and the New conversation button
    are sent as the browser sends them (their own tests use the pages: `sign_in`), through the
    page's own context, so the session cookie is the page's; then one page load, the chat's.
    Through the pages it was three loads: 0.55-0.8 s of the browser's CPU against 0.23-0.3 s."""
    landed = requests_sign_in(page, server, email)
    made = page.request.post(f"{server}/conversations", form={"csrf_token": CSRF.search(landed.text())[1]})
    assert re.search(r"/c/\d+$", made.url), made.url
    page.goto(made.url)


def requests_sign_in(page, server, email):
    """What the sign-in form sends, through `page`'s context (its cookies); no page is loaded.
    Returns where it landed: the conversations page."""
    form = page.request.get(f"{server}/login")
    signed = page.request.post(
        f"{server}/login", form={"csrf_token": CSRF.search(form.text())[1], "email": email, "password": "demo"}
    )
    assert signed.url == f"{server}/", f"the sign-in as {email} did not land on /: {signed.url}"
    return signed


def settled(page):
    """Wait until htmx has settled what it swapped in last: it wires a new element's hx-
    attributes in its settle step (20 ms after the swap). A key pressed on a new card's button
    before then submits its form the plain way: a full page load, which answers the card too,
    but is not the page the test is about. (A click waits for the button to be still first.)"""
    page.wait_for_function("() => !document.querySelector('.htmx-settling, .htmx-swapping')")


class HeldStreams:
    """The page's conversation event streams, held (no answer yet) from now until `release()`
    lets them through: the stream then comes late, as a busy machine's can."""

    def __init__(self, page):
        self.held = []
        self.released = False
        page.route(re.compile(r"/c/\d+/events"), self._hold)

    def _hold(self, route):
        if self.released:
            route.continue_()
        else:
            self.held.append(route)

    def release(self):
        assert self.held, "the page opened no event stream"
        self.released = True
        for route in self.held:
            route.continue_()


def second_copy(page, turn_id):
    """The turn's HTML as it is on the page now, marked out of band: what a second delivery of it
    (the POST's answer, or the event stream) swaps in."""
    clone = "id => { const t = document.getElementById(id).cloneNode(true); t.setAttribute('hx-swap-oob', 'true');"
    return page.evaluate(clone + " return t.outerHTML; }", turn_id)


def swap_in(page, html):
    """What htmx does with an event's fragments (out of band, nothing else swapped)."""
    page.evaluate("html => htmx.swap(document.body, html, {swapStyle: 'none'})", html)


def ask(page, text):
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def signed_in(browser, server, email):
    """A second browser context (its own cookies) signed in as `email`: (context, its page, which
    has loaded nothing yet: each caller goes to the page it is about)."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    other = context.new_page()
    other.set_default_timeout(LONG)
    requests_sign_in(other, server, email)
    return context, other


def sent_messages(tab):
    return tab.locator(".message--user")


def composer_done(tab, sent):
    """The POST of the `sent`-th message has come back (its answer holds the person's message, and
    the composer is cleared in the same step): a reply can arrive over the events first, and a
    next message typed before then would be cleared."""
    expect(sent_messages(tab)).to_have_count(sent)
    expect(tab.locator("#composer.htmx-request")).to_have_count(0)


# What a page's scripts went through (installed in every test page, read when a test fails): the
# event stream's openings, errors and messages as htmx's SSE extension saw them, swap errors and
# uncaught errors.
WATCH = """window.__seen = {};
["htmx:sseOpen", "htmx:sseError", "htmx:sseBeforeMessage", "htmx:sseMessage", "htmx:oobErrorNoTarget",
 "htmx:swapError", "htmx:sseClose", "htmx:afterProcessNode"].forEach((name) => {
  document.addEventListener(name, (e) => {
    if (name === "htmx:afterProcessNode" && !(e.target && e.target.id === "events")) return;
    window.__seen[name] = (window.__seen[name] || 0) + 1;
  });
});
window.addEventListener("error", (e) => { window.__seen.errors = (window.__seen.errors || []).concat(String(e.message)); });
window.__timeline = [];
const note = (line) => window.__timeline.push(Math.round(performance.now()) + " " + line);
document.addEventListener("htmx:sseBeforeMessage", (e) => {
  note("event " + e.detail.lastEventId + " " + String(e.detail.data).slice(0, 70));
});
document.addEventListener("htmx:beforeSwap", (e) => {
  note("answer " + (e.detail.pathInfo || {}).requestPath + " " + e.detail.xhr.status);
});
// (a press, and the request htmx sends for it or not: CI once saw a Confirm click with no request)
document.addEventListener("click", (e) => {
  const b = e.target && e.target.closest && e.target.closest("button");
  if (b) note("click " + (b.textContent || "").trim().slice(0, 20) + (b.isConnected ? "" : " (detached)"));
}, true);
document.addEventListener("htmx:beforeRequest", (e) => { note("request " + (e.detail.pathInfo || {}).requestPath); });
document.addEventListener("submit", (e) => { note("submit " + (e.target.getAttribute("action") || "")); }, true);
document.addEventListener("htmx:oobBeforeSwap", (e) => {
  const d = e.detail, box = document.createElement("div");
  box.appendChild(d.fragment.cloneNode(true));
  const came = box.firstElementChild;
  const what = came ? came.className + (came.hasAttribute("data-waiting") ? " waiting" : "") : "";
  queueMicrotask(() => note("oob #" + d.target.id + " [" + d.target.className + "] <- [" + what + "] " + d.shouldSwap));
});"""
COUNT_STREAMED = "window.streamed = 0; document.addEventListener('htmx:sseMessage', () => { window.streamed += 1; });"


def caught_up(tab, app):
    """Wait until the page has had every event of its conversation so far (install COUNT_STREAMED
    with add_init_script before the page loads; each event here shows something on the page)."""
    from app.extensions import redis_client

    with app.app_context():
        sent = redis_client.client.xlen(f"events:{int(tab.url.rsplit('/', 1)[1])}")
    tab.wait_for_function(f"() => window.streamed >= {sent}", timeout=LONG)
    return sent


def held(tab, routes):
    """The one request a test's route holds (its handler appends (route, the server's answer) to
    `routes`), once that answer is in: the handler runs while Playwright works, so give it turns."""
    deadline = time.monotonic() + LONG / 1000
    while not routes and time.monotonic() < deadline:
        tab.wait_for_timeout(100)
    assert len(routes) == 1, routes
    return routes[0]


@pytest.fixture
def folder(app):
    """acme's reports folder with two files: a folder delete needs an admin's countersignature."""
    reports = Path(app.config["FILES_ROOT"], "acme", "reports")
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "q1.csv").write_text("a,b\n1,2\n")
    (reports / "q2.csv").write_text("a,b\n3,4\n")
    return reports


def what_the_page_showed(page, app=None):
    """A failed browser test's evidence: the page's chat as it was (its HTML and scroll), and, with
    the app, each conversation's events in Redis and its runs. (conftest adds it to the report.)"""
    lines = [f"url: {page.url}"]
    try:
        lines.append("scripts: " + str(page.evaluate("() => window.__seen")))
        lines.extend(page.evaluate("() => window.__timeline || []"))
        lines.append("scroll: " + str(page.evaluate(_SCROLL)))
        lines.append("messages: " + str(page.evaluate(_MESSAGES))[-6000:])
    except Exception as error:  # noqa: BLE001 — the page may be what broke
        lines.append(f"(the page could not be read: {error})")
    if app is not None:
        lines.extend(_server_side(app))
    return "\n".join(lines)


_SCROLL = """() => { const log = document.getElementById("messages");
  return log && {top: log.scrollTop, height: log.scrollHeight, client: log.clientHeight, window: window.innerHeight}; }"""
_MESSAGES = """() => { const log = document.getElementById("messages"); return log ? log.outerHTML : document.body.outerHTML; }"""


def _server_side(app):
    import sqlalchemy as sa

    from app.extensions import db, redis_client
    from app.models import Run

    lines = []
    try:
        with app.app_context():
            for name in sorted(redis_client.client.keys("events:*")):
                for event_id, fields in redis_client.client.xrange(name):
                    shown = " ".join(f"{_text(k)}={_text(v)[:100]}" for k, v in fields.items())
                    lines.append(f"{_text(name)} {_text(event_id)} {shown}")
            for run in db.session.scalars(sa.select(Run).order_by(Run.id)):
                lines.append(f"run {run.id}: conversation {run.conversation_id}, {run.status}, step {run.step}, {run.error}")
            db.session.remove()
    except Exception as error:  # noqa: BLE001
        lines.append(f"(the server's side could not be read: {error})")
    return lines + _threads()


def _threads():
    """Where each of the server's threads is (this process serves the page): a stuck one shows."""
    import sys
    import threading
    import traceback

    names = {thread.ident: thread.name for thread in threading.enumerate()}
    lines = []
    for ident, frame in sys._current_frames().items():
        stack = [f"  {f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}" for f in traceback.extract_stack(frame)]
        lines.append(f"thread {names.get(ident, ident)}:")
        lines.extend(stack[-12:])
        while frame is not None:  # the app's own frames say what they hold (a cursor, a key)
            if "/app/" in frame.f_code.co_filename:
                values = {k: repr(v)[:80] for k, v in frame.f_locals.items() if isinstance(v, str | int | float | bytes)}
                lines.append(f"  {frame.f_code.co_name}: {values}")
            frame = frame.f_back
    return lines


def _text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
