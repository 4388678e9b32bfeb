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
