"""What text may be stored: a person's message is kept whole or refused with the reason, never cut
or lost at save (DESIGN §6, invariant 9); values from JSON are checked before anything stores them."""

from __future__ import annotations

import math
import re
from typing import Any

from app.errors import MessageTooLong, UnstorableText

NUL = "Text may not contain the NUL character (U+0000)."
SURROGATE = (
    "Text may not contain a lone surrogate (a \\ud800–\\udfff escape that is not half of a pair); "
    "send the character itself, encoded as UTF-8."
)
NOT_FINITE = "Numbers must be finite: NaN and Infinity are not JSON."
_SURROGATES = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why this text cannot be stored as it is (every database we run on), or None."""
    if "\x00" in text:
        return NUL
    if _SURROGATES.search(text):  # a str from JSON holds only lone ones: pairs decode to one code point
        return SURROGATE
    return None


def value_problem(value: Any) -> str | None:
    """The first reason a JSON value (keys, strings and numbers, at any depth) cannot be stored.
    Walked with a stack, not recursion, so a deep value cannot exhaust Python's stack here."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
        elif isinstance(item, float):
            problem = None if math.isfinite(item) else NOT_FINITE
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
            problem = None
        elif isinstance(item, list | tuple):
            stack.extend(item)
            problem = None
        else:
            problem = None
        if problem:
            return problem
    return None


def check_message(text: str, max_chars: int) -> str:
    """The person's message as it will be stored, whole; refused (a 4xx naming why) otherwise."""
    problem = text_problem(text)
    if problem:
        raise UnstorableText(problem)
    if len(text) > max_chars:
        raise MessageTooLong(max_chars, len(text))
    return text


def seconds(n: int) -> str:
    """ "1 second", "30 seconds": for the waits a refusal names."""
    return f"{n} second" if n == 1 else f"{n} seconds"


def scrub(text: str) -> str:
    """Text a chat service sent, made storable: NUL dropped, lone surrogates replaced (U+FFFD).
    A webhook cannot be refused back to the person, so its words are kept, safely."""
    return text.replace("\x00", "").encode("utf-16", "surrogatepass").decode("utf-16", "replace")


TITLE_WORDS = 8
TITLE_CHARS = 60
_COMMAND = re.compile(r"/([A-Za-z][A-Za-z0-9_-]*)")


def first_title(text: str) -> str:
    """A short title from a conversation's first message: a slash command by its action's name
    alone ("/delete_post post=2" -> "Delete post": its arguments never show in a list), other
    words by their first few, on one line, cut at a word with "…"."""
    line = " ".join(text.split())
    command = _COMMAND.match(line)
    if command:
        return command.group(1).replace("_", " ").replace("-", " ").strip().capitalize()[:TITLE_CHARS]
    words = line.split(" ")
    title = ""
    for word in words[:TITLE_WORDS]:
        if title and len(title) + 1 + len(word) > TITLE_CHARS:
            break
        title = f"{title} {word}" if title else word
    title = title[:TITLE_CHARS]
    return title if title == line else title.rstrip(" ,;:.-—") + "…"


AGENT_WORDS = "[Written by an agent{named}, not by the person:] "  # before an agent's words, for the model
AGENT_WORDS_END = ", not by the person:] "


def agents_words(text: str) -> str:
    """An agent's words without the line that says whose they are (the offline model reads the
    words themselves: a slash command in them is still a call, its card the agent's)."""
    if text.startswith(AGENT_WORDS[:20]) and AGENT_WORDS_END in text:
        return text.split(AGENT_WORDS_END, 1)[1]
    return text
