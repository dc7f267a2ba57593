"""One chat-completions call to an OpenAI-compatible endpoint, through the official SDK.

It owns the SDK client built from ``[llm]`` (the key read from the named environment variable,
never a file), one request, and the reply as a plain ``Completion``, the SDK's failures as
LLMErrors in the user's terms.  Retries are ours (the SDK's are 0) and only of what is transient,
within the stage's deadline; a refusal (LLMBadRequest, for the ladder) and a 429 (LLMRateLimited,
for the pool's budget) are raised at once, so there is one layer of retries (docs/llm.md).  It
must not parse stage outputs or wait for rate budgets.  ``openai`` is imported on first use.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pegasus.config import LLMSettings
from pegasus import tracing
from pegasus.errors import PegasusError
from pegasus.llm import capabilities, deadline, listen, shared

PLACEHOLDER_KEY = "not-needed"  # sent to servers that need no key: the SDK insists on one
DEFAULT_KEY_ENV = "OPENAI_API_KEY"  # llm.api_key_env's default


def _loopback(base_url: str) -> bool:
    """Whether ``base_url`` is on this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress  # noqa: PLC0415
    from urllib.parse import urlsplit  # noqa: PLC0415

    host = (urlsplit(base_url).hostname or "") if base_url else ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LLMError(PegasusError):
    """A call to the model failed; the message says why."""


class LLMConfigError(LLMError):
    """The ``[llm]`` settings cannot make a client (a missing key variable, no model)."""


class LLMTimeout(LLMError):
    """The endpoint did not answer within ``timeout_s`` (after the SDK's retries)."""


class LLMBadRequest(LLMError):
    """The endpoint refused the request (a 400 or 422, or a 500 naming a parameter sent); ``detail`` is
    its body's text, for the ladder to read."""

    def __init__(self, message: str, detail: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.detail = detail
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.detail, self.status))


class LLMRateLimited(LLMError):
    """The endpoint answered 429; ``retry_after_s`` from Retry-After (or None)."""

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
    """Seconds from a ``retry-after-ms`` or ``Retry-After`` header (seconds or an HTTP date), or None.
    LiteLLM's proxy passes its provider's as ``llm_provider-retry-after``: read as the same."""
    if not headers:
        return None
    lower = {str(key).lower(): str(value) for key, value in headers.items()}
    for name in ("retry-after-ms", "retry-after"):
        if name not in lower and f"llm_provider-{name}" in lower:
            lower[name] = lower[f"llm_provider-{name}"]
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
    import email.utils  # noqa: PLC0415 - here only: email is not loaded in every process (docs/memory.md)

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
        self.serial = False  # it cut a stream because another request waited: it decodes one at a time

    @property
    def endpoint(self) -> str:
        return self.config.base_url or "the OpenAI API"

    def _api_key(self) -> str:
        name = self.config.api_key_env.strip()
        if not name:
            return PLACEHOLDER_KEY
        key = self._environ.get(name, "")
        if not key and name == DEFAULT_KEY_ENV and _loopback(self.config.base_url):
            return PLACEHOLDER_KEY  # a local server (llama-cpp-python, Ollama) with api_key_env left alone
        if not key:
            raise LLMConfigError(f"the environment variable {name} (llm.api_key_env) is not set; set it to "
                                 f"the API key, or set llm.api_key_env = \"\" for a server that needs no key")
        return key

    def _client(self) -> Any:
        if self._sdk is None:
            import openai  # noqa: PLC0415 - only the llm provider needs the SDK

            self._sdk = openai.OpenAI(api_key=self._api_key(), base_url=self.config.base_url or None,
                                      timeout=self.config.timeout_s, max_retries=0,  # ours: see send
                                      http_client=shared.http_client())  # one TLS context per process
        return self._sdk

    def complete(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                 tool_choice: str | None = None) -> Completion:
        """One call in the settings' first shape (pegasus.llm.ladder steps down when it is refused)."""
        shape = capabilities.initial(self.config)
        return self.send(capabilities.request(self.config, shape, messages, tools=tools, tool_choice=tool_choice))

    def send(self, request: Mapping[str, Any], sleep: Any = time.sleep) -> Completion:
        """One chat completion of ``request`` (a request body), sent again after a transient failure up
        to ``max_retries`` times, each attempt within the stage's deadline (pegasus.llm.deadline); LLMError
        (LLMTimeout, LLMRateLimited, LLMBadRequest) on failure.  A 429 is raised at once: its pool pauses
        every call to the model for its Retry-After and runs the stage again (pegasus.llm.budget)."""
        with tracing.call("model", str(request.get("model") or self.config.model)) as traced:
            completion = self._send(request, sleep)
            traced.update({"gen_ai.response.model": completion.model,
                           "gen_ai.usage.input_tokens": int(completion.usage.get("prompt_tokens") or 0),
                           "gen_ai.usage.output_tokens": int(completion.usage.get("completion_tokens") or 0),
                           "gen_ai.response.finish_reasons": (completion.finish_reason or "unknown",),
                           **_server(self.config.base_url)})
            return completion

    def _send(self, request: Mapping[str, Any], sleep: Any) -> Completion:
        for attempt in range(self.config.max_retries + 1):
            try:
                completion = self._send_once(request, self._attempt_s(attempt))
            except _Transient as exc:
                if attempt == self.config.max_retries or isinstance(exc.error, LLMRateLimited) or \
                        (self.serial and isinstance(exc.error, LLMTimeout)):
                    raise exc.error from None  # (a serial server is still decoding it: another would queue behind)
                pause = _backoff(attempt, exc.retry_after_s)
                left = deadline.left_s()
                if left is not None and left - pause < deadline.MIN_ATTEMPT_S:
                    raise exc.error from None  # no time for another attempt: this failure is the stage's
                sleep(pause)
                continue
            if not completion.usage:  # the server reported none: estimated from the text, and marked so
                completion = _with_estimate(completion, request)
            return completion
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _attempt_s(self, attempt: int) -> float:
        """How long this attempt may wait: ``timeout_s``, or less where the stage's deadline comes first.
        On a server that decodes one request at a time (``serial``), the rest of the stage: one that timed
        out would still be decoded, so a retry could only wait behind it."""
        left = deadline.left_s()
        if left is None or (left >= self.config.timeout_s and not self.serial):
            return self.config.timeout_s
        if left < (deadline.MIN_ATTEMPT_S if attempt else deadline.MIN_FIRST_S):  # a stage's first call always tries
            stage = deadline.current()
            raise LLMTimeout(f"{self.endpoint} did not answer: {attempt} attempt(s) of at most "
                             f"{self.config.timeout_s:g}s (llm.timeout_s) filled the stage's "
                             f"{stage.budget_s if stage else 0:g}s (pools.llm_timeout_s, less its margin)")
        return left

    def _send_once(self, request: Mapping[str, Any], timeout_s: float) -> Completion:
        import openai  # noqa: PLC0415

        client = self._client()
        if timeout_s != self.config.timeout_s:
            client = client.with_options(timeout=timeout_s)
        try:
            streamed = self._streamed(client, request)
            if streamed is not None:
                return streamed
            if self.serial and (longer := self._attempt_s(0)) > timeout_s:  # a stream cut just now: see _attempt_s
                timeout_s, client = longer, client.with_options(timeout=longer)
            reply = client.chat.completions.create(**request)
        except openai.APIStatusError as exc:
            raise self._status_error(exc, request) from None
        except openai.APITimeoutError:
            cut = "" if timeout_s == self.config.timeout_s else f" = {self.config.timeout_s:g}s, " + (
                "cut to what was left of the stage's pools.llm_timeout_s" if timeout_s < self.config.timeout_s
                else "extended to the stage's pools.llm_timeout_s: the server decodes one request at a time")
            raise _Transient(LLMTimeout(f"{self.endpoint} did not answer within {timeout_s:.3g}s "
                                        f"(llm.timeout_s{cut}; {self.config.max_retries} retries)")) from None
        except openai.APIConnectionError as exc:
            raise _Transient(LLMError(f"cannot reach {self.endpoint}: {exc.__cause__ or exc}")) from None
        except openai.OpenAIError as exc:
            raise LLMError(f"the call to {self.endpoint} failed: {type(exc).__name__}: {exc}") from None
        return _completion(reply, self.config.model)

    def _status_error(self, exc: Any, request: Mapping[str, Any]) -> Exception:
        """An error status as what it is: a refusal (LLMBadRequest), a transient failure to send again
        (_Transient), or an error that would recur (LLMError)."""
        import openai  # noqa: PLC0415

        status, detail, body = exc.status_code, _status_detail(exc), _body_text(exc)
        said = f"{self.endpoint} answered {status}: {detail}"
        if status in (400, 422) or (status == 500 and capabilities.named(body, request.keys())):
            return LLMBadRequest(said, body, status)
        if isinstance(exc, openai.RateLimitError):
            wait = retry_after_seconds(dict(exc.response.headers))
            after = f"; retry after {wait:g}s" if wait is not None else ""
            return _Transient(LLMRateLimited(f"{self.endpoint} answered 429 Too Many Requests{after}", wait), wait)
        if status in (408, 409) or status >= 500:
            return _Transient(LLMError(said), retry_after_seconds(dict(exc.response.headers)))
        return LLMError(said)

    def _streamed(self, client: Any, request: Mapping[str, Any]) -> Completion | None:
        """The reply streamed to this thread's listener (pegasus.llm.stream), or None: nobody listens,
        streaming is off, or this endpoint refused it (a 400 naming it) or cut it short (no finish_reason):
        remembered, asked again without."""
        sink = listen.current()
        if sink is None or not self.config.stream or self.refuses_stream:
            return None
        try:
            reply = sink.complete(client, request, self.config.model, self.config.loop_repeats)
        except Exception as exc:
            if not sink.refused(exc):
                raise
            self.refuses_stream = True
            return None
        if reply.finish_reason is None:
            # Ended without a finish_reason: cut short (llama-cpp-python's server ends a stream with [DONE]
            # when another request waits: it decodes one at a time).  Asked again whole; from then on its
            # pool sends it one request at a time (pegasus.pool.endpoints), so streams are not cut again,
            # and a stream given up on stops its decoding (a whole request given up on is decoded to its end).
            self.serial = True
            return None
        return reply


class _Transient(Exception):
    """A failure worth sending again (``error`` is what to raise once the retries are spent)."""

    def __init__(self, error: LLMError, retry_after_s: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after_s


MAX_BACKOFF_S = 8.0  # the openai SDK's own figures: 0.5 s doubling to 8 s, jittered; Retry-After up to 60 s


def _server(base_url: str) -> dict[str, Any]:
    """OpenTelemetry's ``server.address`` and ``server.port`` of an endpoint (none for the SDK's default)."""
    if not base_url:
        return {}
    parts = urllib.parse.urlsplit(base_url)
    return {"server.address": parts.hostname or "", **({"server.port": parts.port} if parts.port else {})}


def _backoff(attempt: int, retry_after_s: float | None) -> float:
    if retry_after_s is not None and 0 <= retry_after_s <= 60:
        return retry_after_s
    return min(0.5 * 2 ** attempt, MAX_BACKOFF_S) * (1 - 0.25 * random.random())


def _body_text(exc: Any) -> str:
    """The error's whole body as text (its ``loc`` and ``param`` included), for the ladder to read."""
    body = getattr(exc, "body", None)
    try:
        return (json.dumps(body) if isinstance(body, (dict, list)) else str(body or exc))[:4000]
    except (TypeError, ValueError):
        return str(exc)[:4000]


def _with_estimate(reply: Completion, request: Mapping[str, Any]) -> Completion:
    """The reply with its usage estimated from the text sent and received (``estimated``: 1)."""
    from pegasus.llm.context import request_tokens  # noqa: PLC0415 - kept off the import path of the offline set

    prompt = request_tokens(list(request.get("messages") or []), request.get("tools") or ())
    calls = "".join(call.name + call.arguments for call in reply.tool_calls)
    completion = max(1, (len(reply.content or "") + len(calls) + 3) // 4)
    return replace(reply, usage={"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion, "estimated": 1})


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
