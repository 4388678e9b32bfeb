"""The model's text as the web and the chat services show it (found by a red-team pass over the
model's Markdown): hidden characters are shown, not obeyed, and an autolink whose text is not
where it goes names its host. (The reasons and subjects that pass found: test_reasons_and_subjects.py.)"""

from __future__ import annotations

import pytest

from app.markdown import to_html, to_mrkdwn, to_plain

RLO = "\u202e"


def test_a_bidi_override_in_the_models_text_is_shown_not_obeyed():
    html = to_html(f"open [the docs {RLO}](http://gro.nohtyp.scod.evil.example/)")
    assert RLO not in html and "⟨U+202E⟩" in html
    assert '<span class="link-host">(gro.nohtyp.scod.evil.example)</span>' in html
    for other in (to_mrkdwn, to_plain):
        assert RLO not in other(f"see {RLO}gnp.exe") and "⟨U+202E⟩" in other(f"see {RLO}gnp.exe")


@pytest.mark.parametrize("hidden", ["\u2066", "\u200b", "\U000e0041", "\x1b", "\u061c"])
def test_other_hidden_characters_are_shown_too(hidden):
    assert hidden not in to_html(f"a{hidden}b") and f"⟨U+{ord(hidden):04X}⟩" in to_html(f"a{hidden}b")


def test_an_emoji_sequence_keeps_its_joiner():
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert family in to_html(f"hi {family}")


def test_an_autolink_whose_text_is_not_where_it_goes_names_its_host():
    html = to_html("<http://docs.python.org@127.0.0.1:5099/a1>")
    assert 'href="http://127.0.0.1:5099/a1"' in html
    assert '<span class="link-host">(127.0.0.1:5099)</span>' in html
    plain = to_html("<https://docs.python.org/3/>")
    assert 'href="https://docs.python.org/3/"' in plain and "link-host" not in plain  # its text says where it goes
