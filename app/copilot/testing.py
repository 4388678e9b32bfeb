"""Helpers for tests of actions: a model whose answers are queued, and records of what it saw."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def tool_call(name: str, /, **arguments: Any) -> ToolCallPart:
    """A tool call for QueuedModel.enqueue."""
    return ToolCallPart(name, arguments, tool_call_id=f"call_{uuid.uuid4().hex[:12]}")


def text(content: str) -> TextPart:
    """A text part for QueuedModel.enqueue."""
    return TextPart(content)


class QueuedModel(FunctionModel):
    """Answers with what was enqueued, one response per model request; records every request.

    `enqueue(tool_call(...), text(...))` queues ONE response holding those parts. With the
    queue empty it says "(no scripted answer)"."""

    def __init__(self) -> None:
        self.queue: list[list[Any]] = []
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []
        super().__init__(self._respond, model_name="queued")

    def enqueue(self, *parts: Any) -> QueuedModel:
        self.queue.append(list(parts))
        return self

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        self.infos.append(info)
        parts = self.queue.pop(0) if self.queue else [TextPart("(no scripted answer)")]
        return ModelResponse(parts=parts)

    def seen(self) -> str:
        """Everything the model was sent, as one string (for canary checks)."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        return "\n".join(ModelMessagesTypeAdapter.dump_json(r).decode() for r in self.requests) + "\n".join(
            i.instructions or "" for i in self.infos
        )
