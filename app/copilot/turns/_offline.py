"""The offline model (DESIGN §5), the default: a slash command or the words of a message become a
tool call, tool results and Countersign's news on earlier calls (history.tell_news) are relayed,
and anything else is answered with help."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from app.copilot.text import agents_words

# The metadata key of a request that carries Countersign's news (history.tell_news): the outcome
# lines of cards decided after the conversation moved on. Not the person's words: relayed.
NEWS = "countersign_news"

WORD = re.compile(r"[a-z0-9]+")
STOP = {
    "a",
    "an",
    "the",
    "my",
    "me",
    "i",
    "to",
    "of",
    "please",
    "can",
    "you",
    "this",
    "that",
    "and",
    "or",
    "for",
    "it",
    "is",
    "with",
    "on",
    "in",
    "do",
    "what",
    "all",
}


def offline_model(word_pause: float = 0.0) -> FunctionModel:
    """The deterministic model of DESIGN §5. It streams its answer word by word, `word_pause`
    seconds apart (OFFLINE_WORD_PAUSE_MS), so the demo shows a reply being written as a real
    model's is."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        async for piece in offline_stream(messages, info, word_pause):
            yield piece

    return FunctionModel(offline_respond, stream_function=stream, model_name="offline")


async def offline_stream(messages: list[ModelMessage], info: AgentInfo, word_pause: float) -> AsyncIterator[str | DeltaToolCalls]:
    """offline_respond's answer as a stream: its text a word at a time (spaces and line breaks
    kept), then its tool calls."""
    response = offline_respond(messages, info)
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    for i, word in enumerate(re.findall(r"\S+\s*|\s+", text)):
        if i and word_pause > 0:
            await asyncio.sleep(word_pause)
        yield word
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    for n, call in enumerate(calls):
        yield {n: DeltaToolCall(name=call.tool_name, json_args=json.dumps(call.args_as_dict()), tool_call_id=call.tool_call_id)}


def parse_slash(text: str) -> tuple[str, dict[str, Any]] | None:
    """`/delete_post post=3 title="two words"` -> ("delete_post", {"post": "3", ...})."""
    text = text.strip()
    if not text.startswith("/"):
        return None
    try:
        words = shlex.split(text[1:])
    except ValueError:
        words = text[1:].split()
    if not words:
        return None
    args: dict[str, Any] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if sep and key:
            args[key] = value
    return words[0], args


def offline_respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Relay tool results; otherwise turn a slash command or keywords into a call."""
    last = messages[-1]
    if isinstance(last, ModelRequest):
        news = (last.metadata or {}).get(NEWS)
        if news:  # Countersign's news on earlier calls: relayed, never read as a request
            return ModelResponse(parts=[TextPart("\n".join(map(str, news)))])
        asked = [p.content for p in last.parts if isinstance(p, UserPromptPart)]
        results = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if results and not asked:  # a new message beside waiting calls is answered as a message
            return ModelResponse(parts=[TextPart("\n".join(_result_text(p) for p in results))])
        prompt = asked[-1] if asked else ""
    else:
        prompt = ""
    text = agents_words(prompt if isinstance(prompt, str) else " ".join(str(p) for p in prompt))
    tools = {t.name: t for t in info.function_tools}

    slash = parse_slash(text)
    if slash:
        name, args = slash
        if name in tools:
            return _call(name, args)
        return ModelResponse(parts=[TextPart(f"I have no action called /{name}.\n\n" + _help(tools))])

    best = _route(text, tools)
    if best:
        return _call(best, {})
    return ModelResponse(parts=[TextPart(_help(tools))])


def _call(name: str, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{uuid.uuid4().hex[:12]}")])


def _result_text(part: ToolReturnPart | RetryPromptPart) -> str:
    if isinstance(part, RetryPromptPart):
        return f"I could not call {part.tool_name}: {part.model_response()}"
    if getattr(part, "outcome", "success") != "success":
        return f"I could not call {part.tool_name}: {part.content}"
    return str(part.content)


def _route(text: str, tools: dict[str, Any]) -> str | None:
    """The exposed action whose name, description and examples share most words with the text."""
    words = {w for w in WORD.findall(text.lower()) if w not in STOP}
    if not words:
        return None
    scored = []
    for name, tool in tools.items():
        examples = " ".join((tool.metadata or {}).get("examples", []))
        vocab = set(WORD.findall(f"{name.replace('_', ' ')} {tool.description or ''} {examples}".lower()))
        score = len(words & (vocab - STOP))
        scored.append((score, name))
    scored.sort(reverse=True)
    if scored and scored[0][0] >= 2 and (len(scored) == 1 or scored[0][0] > scored[1][0]):
        return scored[0][1]
    return None


def _help(tools: dict[str, Any]) -> str:
    if not tools:
        return "I have no actions available to you."
    lines = ["Here is what I can do:"]
    for name, tool in sorted(tools.items()):
        first = (tool.description or "").strip().splitlines()[0] if tool.description else ""
        lines.append(f"• /{name} — {first}")
    lines.append('Write /action field=value field="two words", or just ask.')
    return "\n".join(lines)
