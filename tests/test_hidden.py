"""Hidden characters (app/copilot/hidden.py): one definition for cards, the model's words, titles,
messages and search echoes. Red-team finding (2026-12-01): variation selectors (a byte each),
Hangul fillers, the combining grapheme joiner and other Cf characters drew nothing and were shown
nowhere, so an agent could hide a payload inside an email subject the person confirmed."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from app.copilot.approvals._cards import visible
from app.copilot.hidden import removed, shown

KEPT = {"\t", "\n", "\r", "\u200d"}


def smuggled(secret: str) -> str:
    """Bytes written as variation selectors (U+FE00–FE0F, U+E0100–E01EF): the text draws nothing."""
    return "".join(chr(0xE0100 + b - 16) if b >= 16 else chr(0xFE00 + b) for b in secret.encode())


def test_every_control_format_and_separator_character_is_shown():
    missed = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in {"Cc", "Cf", "Zl", "Zp"} and chr(cp) not in KEPT and shown(chr(cp)) == chr(cp)
    ]
    assert missed == []


@pytest.mark.parametrize(
    "ch",
    [
        "\u034f",
        "\u115f",
        "\u1160",
        "\u3164",
        "\uffa0",
        "\u17b4",
        "\u17b5",
        "\u180b",
        "\u180f",
        "\ufe00",
        "\ufe0d",
        "\U000e0100",
        "\U000e01ef",
        "\ufff0",
        "\U000e0080",
        "\U000e0fff",
        "\u2028",
        "\u2029",
        "\U0001d173",
        "\U00013439",
    ],
)
def test_characters_that_draw_nothing_are_shown(ch):
    assert shown(f"a{ch}b") == f"a⟨U+{ord(ch):04X}⟩b"
    assert visible(f"a{ch}b") == f"a⟨U+{ord(ch):04X}⟩b" and removed(f"a{ch}b") == "ab"


def test_a_payload_in_variation_selectors_is_shown_on_a_card_and_in_text():
    payload = smuggled("api key sk-123")
    for show in (shown, visible):
        text = show("Lunch" + payload)
        assert text.startswith("Lunch⟨U+") and text.count("⟨U+") == len("api key sk-123")
    assert removed("Lunch" + payload) == "Lunch"


def test_emoji_keep_their_presentation_selector_and_joiner_but_a_run_of_selectors_is_shown():
    assert shown("⚠️ ❤️ 👩‍💻 🏳️‍🌈 1️⃣ 👍🏽") == "⚠️ ❤️ 👩‍💻 🏳️‍🌈 1️⃣ 👍🏽"
    assert shown("❤\ufe0f\ufe0f") == "❤\ufe0f⟨U+FE0F⟩"
    assert shown("\ufe0fa") == "⟨U+FE0F⟩a" and shown("a\n\ufe0f") == "a\n⟨U+FE0F⟩"
    assert shown("a\u200b\ufe0f") == "a⟨U+200B⟩⟨U+FE0F⟩"


def test_a_bit_per_letter_in_presentation_selectors_or_joiners_is_shown():
    """Red team, second look: U+FE0E/U+FE0F after each letter (a bit each: "hunter2" in 56
    letters of an email subject) and joiners between letters drew nothing and were kept."""
    bits = "L\ufe0eu\ufe0fn\ufe0fc\ufe0eh. \ufe0f7\ufe0f"
    assert shown(bits) == "L⟨U+FE0E⟩u⟨U+FE0F⟩n⟨U+FE0F⟩c⟨U+FE0E⟩h. ⟨U+FE0F⟩7⟨U+FE0F⟩"
    assert shown("a\u200db") == "a⟨U+200D⟩b" and shown("👩\u200db") == "👩⟨U+200D⟩b"
    assert removed(bits) == "Lunch. 7" and visible(bits).count("⟨U+") == 6


def test_default_ignorable_code_points_unassigned_here_are_shown_too():
    assert shown("a\u2065b") == "a⟨U+2065⟩b"


def test_a_card_is_stricter_every_selector_joiner_and_carriage_return_is_shown():
    assert visible("a\u200db\r\nc\td") == "a⟨U+200D⟩b⟨U+000D⟩\nc\td"
    assert visible("⚠️ 👩‍💻") == "⚠⟨U+FE0F⟩ 👩⟨U+200D⟩💻"
    assert shown("👩‍💻 b\r\nc") == "👩‍💻 b\r\nc"
