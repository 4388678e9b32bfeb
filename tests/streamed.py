"""A scripted model that streams its words, and gates a test opens: a test decides when the
model goes on (no sleeps, no timing), so "while the model thinks" is a state the test holds."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

OPEN_WITHIN = 60  # seconds a gate waits for its test before the model gives up (a broken test, not a slow one)


@dataclass
class Reply:
    """One scripted model response: words streamed in order, and tool calls after them. With a
    gate, the model sends the first word, then waits for the gate before the rest."""

    words: list[str]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gate: threading.Event | None = None
    hold: threading.Event | None = None  # after the second word, the model waits for this one too
    fail: Exception | None = None  # raised after the first word (the provider broke mid-stream)
    fail_after: int = 1  # ... or after this many words


class StreamedModel(FunctionModel):
    """Streams what was queued (one Reply per model request); with nothing queued, the offline
    model's answer, streamed. `started` is set each time a request begins streaming."""

    def __init__(self) -> None:
        self.queue: list[Reply] = []
        self.requests: list[list[ModelMessage]] = []
        self.started = threading.Event()
        super().__init__(stream_function=self._stream, model_name="streamed")

    def enqueue(
        self,
        words: str | list[str],
        *,
        calls: list[tuple[str, dict[str, Any]]] | None = None,
        gate: threading.Event | None = None,
        fail: Exception | None = None,
        fail_after: int = 1,
        hold: threading.Event | None = None,
    ) -> StreamedModel:
        split = words.split(" ") if isinstance(words, str) else words
        self.queue.append(Reply(split, calls or [], gate, hold, fail, fail_after))
        return self

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        self.requests.append(list(messages))
        reply = self.queue.pop(0) if self.queue else _offline(messages, info)
        self.started.set()
        for i, word in enumerate(reply.words):
            yield word if i == len(reply.words) - 1 else word + " "
            waits = reply.gate if i == 0 else reply.hold if i == 1 else None
            if waits is not None:
                opened = await asyncio.to_thread(waits.wait, OPEN_WITHIN)
                assert opened, "the test never opened the model's gate"
            if i == reply.fail_after - 1 and reply.fail is not None:
                raise reply.fail
        for n, (name, arguments) in enumerate(reply.calls):
            yield {n: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=f"call_{uuid.uuid4().hex[:12]}")}

    def seen(self) -> str:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        return "\n".join(ModelMessagesTypeAdapter.dump_json(r).decode() for r in self.requests)


def _offline(messages: list[ModelMessage], info: AgentInfo) -> Reply:
    from app.copilot.turns._offline import offline_respond

    response = offline_respond(messages, info)
    words = [w for p in response.parts if isinstance(p, TextPart) for w in p.content.split(" ")]
    calls = [(p.tool_name, p.args_as_dict()) for p in response.parts if isinstance(p, ToolCallPart)]
    return Reply(words, calls)
