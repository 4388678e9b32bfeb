"""Characters that change what text says without being seen, and text with them shown.

One definition for every place that shows words someone else wrote (a card's rows, the model's
Markdown, titles, the person's or an agent's messages, a search echoed, chat connectors): the
controls (Cc), format characters (Cf: bidi overrides and isolates, zero-width ones, tag
characters, the soft hyphen…), line and paragraph separators (Zl, Zp), and the characters that
draw nothing though Unicode calls them marks or letters: variation selectors (each of which can
carry a byte: U+FE00–FE0F, U+E0100–E01EF), the combining grapheme joiner, Hangul fillers,
Khmer's inherent vowels, Mongolian selectors, and the unassigned U+FFF0–FFF8 and the rest of
plane 14. They are shown as ⟨U+XXXX⟩.

Emoji keep what they are made of, outside cards: U+FE0E/U+FE0F right after an emoji (❤️ is
U+2764 U+FE0F) or inside a keycap (1️⃣), and the joiner U+200D between two emoji (👩‍💻). Anywhere
else — after a letter, another selector, first — they could carry a bit each, and are shown. On a
card (`strict`) every variation selector, every joiner and every carriage return is shown.
"""

from __future__ import annotations

import re

# Cc (but tab, line feed and carriage return), Cf, Zl, Zp (Unicode 15), every default-ignorable
# code point (U+2065, unassigned, included), and the invisible marks and letters named above; but
# U+FE0E/U+FE0F and the joiner U+200D, which emoji use.
_ALWAYS = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
# Characters an emoji presentation selector or joiner may follow (Unicode's emoji, by block).
_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf"
    "\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_EMOJI_PARTS = (
    f"(?<![{_EMOJI}#*0-9])[\ufe0e\ufe0f]"  # a selector after no emoji (or keycap digit)
    "|(?<=[#*0-9])[\ufe0e\ufe0f](?!\u20e3)"  # a digit's selector that makes no keycap
    f"|(?<![{_EMOJI}\ufe0f])\u200d|\u200d(?![{_EMOJI}])"  # a joiner not between two emoji
)
HIDDEN = re.compile(f"[{_ALWAYS}]|{_EMOJI_PARTS}")
HIDDEN_STRICT = re.compile(f"[{_ALWAYS}\ufe0e\ufe0f\r\u200d]")


def _mark(match: re.Match[str]) -> str:
    return f"⟨U+{ord(match.group()):04X}⟩"


def shown(text: str, strict: bool = False) -> str:
    """The text with every hidden character shown as ⟨U+XXXX⟩ (tabs and line breaks kept)."""
    return (HIDDEN_STRICT if strict else HIDDEN).sub(_mark, text)


def removed(text: str) -> str:
    """The text without its hidden characters: for a field the person edits and sends back, so
    that what they read is what is sent (a marker there would be sent as text)."""
    return HIDDEN.sub("", text)
