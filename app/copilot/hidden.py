"""Characters that change what text says without being seen, and text with them shown.

One definition for every place that shows words someone else wrote (a card's rows, the model's
Markdown, titles, the person's or an agent's messages, a search echoed, chat connectors): the
controls (Cc), format characters (Cf: bidi overrides and isolates, zero-width ones, tag
characters, the soft hyphen…), line and paragraph separators (Zl, Zp), and the characters that
draw nothing though Unicode calls them marks or letters: variation selectors (each of which can
carry a byte: U+FE00–FE0F, U+E0100–E01EF), the combining grapheme joiner, Hangul fillers,
Khmer's inherent vowels, Mongolian selectors, and the unassigned U+FFF0–FFF8 and the rest of
plane 14. They are shown as ⟨U+XXXX⟩.

Two are kept where text needs them: the emoji joiner (U+200D: 👩‍💻), and U+FE0E/U+FE0F right
after a character that is itself seen (❤️ is U+2764 U+FE0F); a selector anywhere else (after
another one, after a hidden character, first) is shown. Cards are stricter (`strict`): there the
joiner and carriage returns are shown too.
"""

from __future__ import annotations

import re

# Cc (but tab, line feed and carriage return), Cf, Zl, Zp (Unicode 15), and the invisible marks,
# letters and unassigned code points named above, but U+FE0E/U+FE0F and the joiner U+200D.
_ALWAYS = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164"
    "\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_SELECTORS = "\ufe0e\ufe0f"
# A selector after a line break, another selector or a hidden character is not part of an emoji.
_LONE_SELECTOR = f"(?:^|(?<=[\\t\\n\\r{_SELECTORS}{_ALWAYS}]))[{_SELECTORS}]"
HIDDEN = re.compile(f"[{_ALWAYS}]|{_LONE_SELECTOR}")
HIDDEN_STRICT = re.compile(f"[{_ALWAYS}\\r\u200d]|{_LONE_SELECTOR}")


def _mark(match: re.Match[str]) -> str:
    return f"⟨U+{ord(match.group()):04X}⟩"


def shown(text: str, strict: bool = False) -> str:
    """The text with every hidden character shown as ⟨U+XXXX⟩ (tabs and line breaks kept)."""
    return (HIDDEN_STRICT if strict else HIDDEN).sub(_mark, text)


def removed(text: str) -> str:
    """The text without its hidden characters: for a field the person edits and sends back, so
    that what they read is what is sent (a marker there would be sent as text)."""
    return HIDDEN.sub("", text)
