"""Text on a card that can pass for other text: a word mixing scripts (a Cyrillic "а" in
"pаypal"), an internationalised domain, a character that looks like a slash or a dot, a name
ending in a space. The card keeps the real text and says, in words, what is odd about it."""

from __future__ import annotations

import re
import unicodedata

# Scripts that share a word in ordinary writing (Unicode TS #39, "highly restrictive").
USUAL_MIXES = ({"Latin", "Han", "Hiragana", "Katakana"}, {"Latin", "Han", "Bopomofo"}, {"Latin", "Han", "Hangul"})
SCRIPT_WORDS = {"CJK": "Han", "IDEOGRAPHIC": "Han", "KATAKANA-HIRAGANA": "Katakana"}
# Characters that pass for a path's or an address's punctuation (none is usual in a file name).
PASSES_FOR = {
    "/": "\u2215\u2044\uff0f\u29f8\u2571\u1735\u2f03\u0338",
    ".": "\u2024\uff0e\ufe52\u0701\u0702\ua4f8",
    "@": "\uff20\ufe6b",
}
WORD = re.compile(r"\w+")


def script(ch: str) -> str:
    """The script of a letter, read from its Unicode name ("CYRILLIC SMALL LETTER A" -> Cyrillic);
    "Common" for anything that is not a letter."""
    if not unicodedata.category(ch).startswith("L"):
        return "Common"
    first = unicodedata.name(ch, "UNKNOWN").split(" ")[0]
    return SCRIPT_WORDS.get(first, first.title())


def mixed(word: str) -> list[str]:
    """The scripts of a word when they mix in a way ordinary writing does not, else []."""
    scripts = {script(ch) for ch in word} - {"Common"}
    if len(scripts) < 2 or any(scripts <= usual for usual in USUAL_MIXES):
        return []
    return sorted(scripts, key=lambda s: (s != "Latin", s))


def _odd_letters(word: str) -> str:
    """The letters of a word outside its main script, named ("а is CYRILLIC SMALL LETTER A")."""
    letters = [script(ch) for ch in word if script(ch) != "Common"]
    main = max(set(letters), key=lambda s: (letters.count(s), s == "Latin"))
    odd = dict.fromkeys(ch for ch in word if script(ch) not in ("Common", main))
    return "; ".join(f"{ch} is {unicodedata.name(ch, 'an unnamed character')}" for ch in list(odd)[:3])


def warnings(text: str) -> list[str]:
    """Words of this text that mix scripts, one sentence each (none for ordinary text)."""
    found = []
    for word in dict.fromkeys(WORD.findall(text)):
        if mixed(word):
            found.append(f"“{word}” mixes {' and '.join(mixed(word))} letters ({_odd_letters(word)}).")
    return found


def name_warnings(path: str) -> list[str]:
    """warnings() for a file path, plus characters that pass for a slash or a dot and names that
    begin or end with a space."""
    found = warnings(path)
    for plain, fakes in PASSES_FOR.items():
        seen = sorted({ch for ch in path if ch in fakes})
        if seen:
            names = ", ".join(f"{ch} ({unicodedata.name(ch, '?')})" for ch in seen)
            found.append(f"The path holds {names}, which looks like “{plain}” but is not.")
    edges = [part for part in path.split("/") if part != part.strip()]
    if edges:
        found.append(f"“{edges[0]}” begins or ends with a space.")
    if unicodedata.normalize("NFC", path) != path:
        # "café" can be spelled two ways that look the same; two such files could share a card.
        found.append("The name is spelled in an unusual Unicode form (not NFC): another file may look the same.")
    return found


def punycode(domain: str) -> str:
    """The ASCII (IDNA) form of a domain, label by label: what DNS and mail servers see."""
    labels = []
    for label in domain.split("."):
        labels.append(label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii"))
    return ".".join(labels)


def email_shown(address: str) -> tuple[str, list[str]]:
    """An address as a card shows it (with its punycode alongside when it has one) and what is odd
    about it: non-ASCII letters anywhere, which a look-alike needs (mixed words are warnings())."""
    local, _, domain = address.rpartition("@")
    ascii_domain = punycode(domain)
    shown = address if ascii_domain == domain else f"{address} (punycode: {local}@{ascii_domain})"
    odd = dict.fromkeys(ch for ch in address if not ch.isascii() and unicodedata.category(ch).startswith("L"))
    if not odd:
        return shown, []
    names = "; ".join(f"{ch} is {unicodedata.name(ch, 'an unnamed character')}" for ch in list(odd)[:4])
    where = "domain" if all(ch in domain for ch in odd) else "address"
    return shown, [f"The {where} is not plain ASCII ({names}): check it is the one you mean."]
