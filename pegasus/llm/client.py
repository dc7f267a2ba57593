"""One chat-completions call to an OpenAI-compatible endpoint, through the official SDK.

What it owns: building the SDK client from ``[llm]`` settings (the key read from
the environment variable the settings name, never from a file), sending one
non-streaming request, and turning the reply into a plain ``Completion`` and the
SDK's failures into LLMErrors that say what happened in the user's terms.  What
it must not do: parse stage outputs, retry invalid replies, or wait for rate
budgets (the SDK retries transient failures ``max_retries`` times; after that a
429 is an LLMRateLimited carrying Retry-After, for the caller to schedule).

The ``openai`` package is imported on first use, so the offline set never loads it.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pegasus.config import LLMSettings
from pegasus.errors import PegasusError
from pegasus.llm import capabilities, listen, shared

PLACEHOLDER_KEY = "not-needed"  # sent to servers that need no key: the SDK insists on one


class LLMError(PegasusError):
    """A call to the model failed; the message says why."""


class LLMConfigError(LLMError):
    """The ``[llm]`` settings cannot make a client (a missing key variable, no model)."""


class LLMTimeout(LLMError):
    """The endpoint did not answer within ``timeout_s`` (after the SDK's retries)."""


class LLMBadRequest(LLMError):
    """The endpoint refused the request (400/422); ``detail`` is its own message, for the ladder to read."""

    def __init__(self, message: str, detail: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.detail = detail
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.detail, self.status))


class LLMRateLimited(LLMError):
    """The endpoint answered 429 after the SDK's retries; ``retry_after_s`` from Retry-After (or None)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.retry_after_s))


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for: ``arguments`` is the raw JSON text it wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens, total_tokens
    model: str = ""
    finish_reason: str | None = None


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds from a ``retry-after-ms`` or ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not headers:
        return None
    lower = {str(key).lower(): str(value) for key, value in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ChatClient:
    """Chat completions on one endpoint and model; the SDK client is made on the first call."""

    def __init__(self, config: LLMSettings, *, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._environ = os.environ if environ is None else environ
        self._sdk: Any = None
        self.refuses_stream = False  # the endpoint answered a streamed request 400 (llm.stream)

    @property
    def endpoint(self) -> str:
        return self.config.base_url or "the OpenAI API"

    def _api_key(self) -> str:
        name = self.config.api_key_env.strip()
        if not name:
            return PLACEHOLDER_KEY
        key = self._environ.get(name, "")
        if not key:
            raise LLMConfigError(f"the environment variable {name} (llm.api_key_env) is not set; set it to "
                                 f"the API key, or set llm.api_key_env = \"\" for a server that needs no key")
        return key

    def _client(self) -> Any:
        if self._sdk is None:
            import openai  # noqa: PLC0415 - only the llm provider needs the SDK

            self._sdk = openai.OpenAI(api_key=self._api_key(), base_url=self.config.base_url or None,
                                      timeout=self.config.timeout_s, max_retries=self.config.max_retries,
                                      http_client=shared.http_client())  # one TLS context per process
        return self._sdk

    def complete(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                 tool_choice: str | None = None) -> Completion:
        """One call in the settings' first shape (pegasus.llm.ladder steps down when it is refused)."""
        shape = capabilities.initial(self.config)
        return self.send(capabilities.request(self.config, shape, messages, tools=tools, tool_choice=tool_choice))

    def send(self, request: Mapping[str, Any]) -> Completion:
        """One non-streaming chat completion of ``request`` (a request body); LLMError (LLMTimeout,
        LLMRateLimited, LLMBadRequest) on failure."""
        import openai  # noqa: PLC0415

        client = self._client()
        try:
            streamed = self._streamed(client, request)
            if streamed is not None:
                return streamed
            reply = client.chat.completions.create(**request)
        except openai.BadRequestError as exc:
            raise LLMBadRequest(f"{self.endpoint} answered 400: {_status_detail(exc)}", _status_detail(exc),
                                400) from None
        except openai.RateLimitError as exc:
            wait = retry_after_seconds(dict(exc.response.headers))
            after = f"; retry after {wait:g}s" if wait is not None else ""
            raise LLMRateLimited(f"{self.endpoint} answered 429 Too Many Requests after "
                                 f"{self.config.max_retries} retries{after}", wait) from None
        except openai.APITimeoutError:
            raise LLMTimeout(f"{self.endpoint} did not answer within {self.config.timeout_s:g}s "
                             f"(llm.timeout_s; {self.config.max_retries} retries)") from None
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach {self.endpoint}: {exc.__cause__ or exc}") from None
        except openai.UnprocessableEntityError as exc:  # 422: some servers' word for an unknown parameter
            raise LLMBadRequest(f"{self.endpoint} answered 422: {_status_detail(exc)}", _status_detail(exc),
                                422) from None
        except openai.APIStatusError as exc:
            raise LLMError(f"{self.endpoint} answered {exc.status_code}: {_status_detail(exc)}") from None
        except openai.OpenAIError as exc:
            raise LLMError(f"the call to {self.endpoint} failed: {type(exc).__name__}: {exc}") from None
        return _completion(reply, self.config.model)

    def _streamed(self, client: Any, request: Mapping[str, Any]) -> Completion | None:
        """The reply streamed to this thread's listener (pegasus.llm.stream), or None: nobody listens,
        streaming is off, or this endpoint refused it (a 400 naming it: remembered, asked again without)."""
        sink = listen.current()
        if sink is None or not self.config.stream or self.refuses_stream:
            return None
        try:
            return sink.complete(client, request, self.config.model)
        except Exception as exc:
            if not sink.refused(exc):
                raise
            self.refuses_stream = True
            return None


def _status_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        return json.dumps(body)[:500]
    return str(exc)[:500]


def usage_of(reported: Any) -> dict[str, int]:
    """A reply's (or a stream's final chunk's) usage: prompt, completion and total tokens, and
    ``cached_tokens`` from ``prompt_tokens_details`` when the server sent it."""
    prompt, completion = int(reported.prompt_tokens or 0), int(reported.completion_tokens or 0)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": int(reported.total_tokens or prompt + completion)}
    details = getattr(reported, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if isinstance(cached, int):
        usage["cached_tokens"] = cached
    return usage


def _completion(reply: Any, model: str) -> Completion:
    if not getattr(reply, "choices", None):
        raise LLMError(f"the reply has no choices: {str(reply)[:300]}")
    choice = reply.choices[0]
    message = choice.message
    calls = tuple(ToolCall(id=str(call.id or f"call_{n}"), name=str(call.function.name),
                           arguments=str(call.function.arguments or "{}"))
                  for n, call in enumerate(getattr(message, "tool_calls", None) or [])
                  if getattr(call, "function", None) is not None)
    usage = usage_of(reply.usage) if reply.usage is not None else {}
    return Completion(content=message.content, tool_calls=calls, usage=usage,
                      model=str(getattr(reply, "model", None) or model), finish_reason=choice.finish_reason)
