"""Talking to a model: an OpenAI-compatible chat client, the capability ladder (which request shape
each endpoint and model take), the stage prompts, token usage,
and the rate-budget admission component (pure: the llm pool feeds it a clock).

Nothing here imports Thespian; ``openai`` is imported on the first call only.
"""

from pegasus.llm.client import (
    ChatClient,
    Completion,
    LLMBadRequest,
    LLMConfigError,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    ToolCall,
    retry_after_seconds,
)
from pegasus.llm.ratelimit import RateLimiter, RateLimiters, estimate_tokens
from pegasus.llm.usage import UsageMeter, metering, record

__all__ = [
    "ChatClient", "Completion", "LLMBadRequest", "LLMConfigError", "LLMError", "LLMRateLimited", "LLMTimeout",
    "RateLimiter", "RateLimiters", "ToolCall", "UsageMeter", "estimate_tokens", "metering", "record",
    "retry_after_seconds",
]
