"""Which model the agent talks to: the offline model (default), an OpenAI-compatible server, or
Anthropic. COUNTERSIGN_MODEL is checked at start; the model is made on the first turn, and only
then is the chosen model's module imported (pydantic-ai's and the provider SDK's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_ai.models import Model

PROVIDERS = ("offline", "openai", "anthropic")


def check(spec: str) -> None:
    """Refuse a COUNTERSIGN_MODEL that names no provider we speak (at start: imports nothing)."""
    if spec.partition(":")[0] not in PROVIDERS:
        raise ValueError(f"COUNTERSIGN_MODEL={spec!r} is not understood: use offline, openai:<model> or anthropic:<model>")


def make_model(
    spec: str, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0, word_pause: float = 0.0
) -> Model:
    """`offline`, `openai:<model>` or `anthropic:<model>`. SDK retries are off: a failure
    reaches the person at once, as a message with a Retry button."""
    check(spec)
    provider, _, name = spec.partition(":")
    if provider == "offline":
        from app.copilot.turns._offline import offline_model

        return offline_model(word_pause)
    if provider == "openai":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=timeout)
        return OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client))
    # anthropic, the one provider left: check() lets no other through
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    anthropic = AsyncAnthropic(base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=timeout)
    return AnthropicModel(name, provider=AnthropicProvider(anthropic_client=anthropic))
