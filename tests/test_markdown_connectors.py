"""The model's Markdown on chat platforms: the same words in the platform's own markup, escaped.
Slack gets mrkdwn where no mention (<!channel>, <@U…>) or link but a real http(s) one can be made;
Telegram and email get plain text with every URL in full, and Telegram shows no link preview (it
would fetch what the model wrote)."""

from __future__ import annotations

from app.copilot.kit import text
from tests.fake_chat import Chat, chat_fixtures

services, app_config, chat = chat_fixtures()

INJECTED = "Done <!channel> <@U123> <https://evil|https://good> & **bold** [good.com](https://evil.example/p)"


def test_slack_posts_the_reply_as_escaped_mrkdwn(app, services, model):
    slack = Chat(app, "slack", services)
    model.enqueue(text(INJECTED))
    slack.say("hello")
    [said] = [p for p in services[0].posts if p.get("text", "").startswith("Done")]
    assert said["text"] == (
        "Done &lt;!channel&gt; &lt;@U123&gt; &lt;https://evil|https://good&gt; &amp; *bold* "
        "<https://evil.example/p|good.com> (evil.example)"
    )
    assert said["unfurl_links"] is False and said["unfurl_media"] is False


def test_slack_never_links_what_is_not_http(app, services, model):
    slack = Chat(app, "slack", services)
    model.enqueue(text("[x](javascript:alert(1)) [<!channel>](https://ok.example) <mailto:a@b.c|x>"))
    slack.say("hello")
    said = services[0].posts[-1]["text"]
    assert said == "x <https://ok.example|&lt;!channel&gt;> (ok.example) &lt;mailto:a@b.c|x&gt;"


def test_telegram_posts_plain_text_without_parse_mode_or_link_preview(app, services, model):
    telegram = Chat(app, "telegram", services)
    model.enqueue(text(INJECTED + " ![x](http://127.0.0.1:9/leak?q=secret)"))
    telegram.say("hello")
    said = services[0].posts[-1]
    assert "parse_mode" not in said and said["link_preview_options"] == {"is_disabled": True}
    assert said["text"] == (
        "Done <!channel> <@U123> <https://evil|https://good> & bold good.com (https://evil.example/p) "
        "image: 127.0.0.1:9 (http://127.0.0.1:9/leak?q=secret)"
    )


def test_email_posts_plain_text_with_every_url_in_full(app, services, model):
    email = Chat(app, "email", services)
    model.enqueue(text("# Plan\n\n- [docs](https://evil.example/p)\n- two"))
    email.say("hello")
    [mail] = [m for m in services[1].inbox.messages if "Plan" in m.get_payload(decode=True).decode()]
    assert mail.get_content_type() == "text/plain"
    body = mail.get_payload(decode=True).decode().replace("\r\n", "\n")
    assert body.strip() == "Plan\n\n• docs (https://evil.example/p)\n• two"


def test_markdown_that_shows_nothing_is_posted_as_written_not_empty(app, services, model):
    slack = Chat(app, "slack", services)
    model.enqueue(text("[<!channel>](javascript:alert(1))"))
    slack.say("hello")
    said = services[0].posts[-1]["text"]
    assert said == "&lt;!channel&gt;"  # the link's text, escaped: it still shows something
    model.enqueue(text("[](javascript:alert(1))"))
    slack.say("again")
    assert services[0].posts[-1]["text"] == "[](javascript:alert(1))"


def test_telegram_never_gets_an_empty_message(app, services, model):
    telegram = Chat(app, "telegram", services)
    model.enqueue(text("[x]: https://evil.example"))
    telegram.say("hello")
    assert services[0].posts[-1]["text"] == "[x]: https://evil.example"


def all_said(chat: Chat) -> list[str]:
    """The texts posted back in the chat's thread, oldest first (an email's body decoded)."""
    if chat.name == "email":
        return [m.get_payload(decode=True).decode() for m in chat.smtp.inbox.messages]
    return chat.sent()


HIDDEN_REPLIES = [
    '[x]: https://a.example "Your refund of \u202e00.001$\u202c is ready \U000e0041\U000e0042"',  # renders to nothing
    "[\u202e]: http://a.example",
    "[](javascript:\u202e)",
    "Refund of [PayPal&#x202E;](https://moc.lapyap.io/) ready",
]


def test_no_reply_reaches_a_chat_with_a_hidden_character_even_one_that_renders_to_nothing(app, services, model):
    """A reply whose Markdown shows nothing went out as written, hidden characters and all (a
    security review's find: a bidi override reorders an amount in Slack, Telegram and email); a
    reference decoded by the parser did too. Every post shows them as ⟨U+XXXX⟩."""
    from app.copilot.hidden import HIDDEN

    for name in ("slack", "telegram", "email"):
        chat = Chat(app, name, services)
        for reply in HIDDEN_REPLIES:
            model.enqueue(text(reply))
            before = len(all_said(chat))
            chat.say("hello")
            [said] = all_said(chat)[before:]  # (this reply, and only it)
            assert not HIDDEN.search(said) and "⟨U+" in said, (name, ascii(said))


def test_a_notice_quoting_a_tools_result_reaches_a_chat_with_its_hidden_characters_shown(app, services):
    """Chat posts that are not the model's Markdown (a notice quotes what a tool returned, which
    quotes a post's title) go through each connector's send(): shown there, whoever wrote them."""
    from app.connectors.services import CONNECTORS
    from app.copilot.hidden import HIDDEN
    from app.extensions import db
    from app.models import ConnectorThread

    for name in ("slack", "telegram", "email"):
        chat = Chat(app, name, services)
        chat.say("/list_posts")  # (the thread exists from here)
        before = len(all_said(chat))
        with app.app_context():
            thread = db.session.query(ConnectorThread).filter_by(connector=name).one()
            CONNECTORS[name].send(thread, "Stopped. Before it stopped: publish_post: Published “Spring\u202e meetup”.")
        [said] = all_said(chat)[before:]
        assert not HIDDEN.search(said) and "Spring⟨U+202E⟩ meetup" in said, (name, ascii(said))
