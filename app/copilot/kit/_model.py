"""The kit's queued model: a test enqueues the model's answers (tool calls, text) one response at
a time; with nothing queued it behaves as the offline model."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def tool_call(name: str, /, **arguments: Any) -> ToolCallPart:
    """A tool call for QueuedModel.enqueue."""
    return ToolCallPart(name, arguments, tool_call_id=f"call_{uuid.uuid4().hex[:12]}")


def text(content: str) -> TextPart:
    """A text part for QueuedModel.enqueue."""
    return TextPart(content)


class QueuedModel(FunctionModel):
    """Answers with what was enqueued, one response per model request, and records every request.
    With nothing queued it behaves as the offline model (slash commands, keywords, help).

    `enqueue(tool_call(...), text(...))` queues ONE response holding those parts."""

    def __init__(self) -> None:
        self.queue: list[list[Any]] = []
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []
        super().__init__(self._respond, model_name="queued")

    def enqueue(self, *parts: Any) -> QueuedModel:
        self.queue.append(list(parts))
        return self

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from app.copilot.turns import offline_respond

        self.requests.append(list(messages))
        self.infos.append(info)
        if not self.queue:
            return offline_respond(messages, info)
        return ModelResponse(parts=self.queue.pop(0))

    def seen(self) -> str:
        """Everything the model was sent, as one string (for canary checks)."""
        sent = [ModelMessagesTypeAdapter.dump_json(r).decode() for r in self.requests]
        return "\n".join(sent + [i.instructions or "" for i in self.infos])
