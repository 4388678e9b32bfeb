"""The offline model (DESIGN §5), the default: a slash command or the words of a message become a
tool call, tool results are relayed, and anything else is answered with help."""

from __future__ import annotations

import re
import shlex
import uuid
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
from pydantic_ai.models.function import AgentInfo, FunctionModel

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


def offline_model() -> FunctionModel:
    """The deterministic model of DESIGN §5."""
    return FunctionModel(offline_respond, model_name="offline")


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
        asked = [p.content for p in last.parts if isinstance(p, UserPromptPart)]
        results = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if results and not asked:  # a new message beside waiting calls is answered as a message
            return ModelResponse(parts=[TextPart("\n".join(_result_text(p) for p in results))])
        prompt = asked[-1] if asked else ""
    else:
        prompt = ""
    text = prompt if isinstance(prompt, str) else " ".join(str(p) for p in prompt)
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
