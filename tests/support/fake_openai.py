"""A local HTTP server that speaks the OpenAI chat-completions protocol, for the tests.

``ThreadingHTTPServer`` on 127.0.0.1, port 0 (the kernel's choice).  Every POST to
``/v1/chat/completions`` takes the next scripted reply (a completion, an HTTP
error with headers, or a delay first) and records the request body, so a test
can assert on what the processors sent.  With no scripted reply left, it answers
500 with a message saying so: a test that makes one call too many fails clearly.

    with FakeOpenAI([completion(content='{"answer": "hi"}')]) as server:
        ... base_url=server.url ...
        assert server.requests[0]["model"] == "test-model"

A request with ``"stream": true`` gets the same reply as OpenAI streams it: Server-Sent
Events (``data: {chunk}``) over chunked transfer encoding, a role chunk, the content in
pieces of ``chunk_chars``, tool calls in pieces by index, a chunk with the finish reason,
the usage chunk (empty choices) when ``stream_options.include_usage`` asks, then
``data: [DONE]``; ``chunk_delay_s`` between chunks, and ``hold`` (an Event) keeps the rest
of the stream back after the first piece of content until it is set.  ``refuse_stream``
makes the server answer a streamed request 400 as servers without streaming do; ``cut_streams``
cuts that many streams after their first piece, as llama-cpp-python's server does.  Each
stream's end is recorded in ``stream_ends``: "done", or "client closed" when the client
hung up first.

``/v1/embeddings`` answers as OpenAI's does (``embeddings_reply``): deterministic vectors
(``embedding_of``: words hashed to dimensions, ``SYNONYMS`` sharing one), base64 or floats
as ``encoding_format`` asks, and its 400s and 404 (an unknown model).
"""

from __future__ import annotations

import array
import base64
import itertools
import json
import math
import re
import select
import socket
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
_IDS = itertools.count(1)


def tool_call(name: str, args: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id or f"call_{next(_IDS)}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def completion(content: str | dict[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None, *,
               prompt_tokens: int = 11, completion_tokens: int = 7, delay_s: float = 0.0,
               cached_tokens: int | None = None, chunk_chars: int = 8, chunk_delay_s: float = 0.0,
               hold: threading.Event | None = None) -> Reply:
    """A 200 reply: ``content`` (a dict is sent as its JSON text) and/or ``tool_calls``, with usage
    (``cached_tokens``: ``usage.prompt_tokens_details.cached_tokens``, as OpenAI reports a prompt-cache hit);
    when the request streams, sent in chunks of ``chunk_chars`` ``chunk_delay_s`` apart, the rest held
    after the first chunk until ``hold`` is set."""
    text = json.dumps(content) if isinstance(content, dict) else content
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {"object": "chat.completion", "created": int(time.time()),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
    if cached_tokens is not None:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
    return {"status": 200, "headers": {}, "body": body, "delay_s": delay_s,
            "stream": {"chunk_chars": chunk_chars, "chunk_delay_s": chunk_delay_s, "hold": hold}}


def stream_chunks(body: dict[str, Any], *, chunk_chars: int = 8, include_usage: bool = True) -> list[dict[str, Any]]:
    """A completion's body as OpenAI streams it: the chunks, in order (without ``[DONE]``)."""
    choice = body["choices"][0]
    message, base = choice["message"], {key: body[key] for key in ("id", "created", "model") if key in body}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                "usage": None}

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    chunks += [chunk({"content": text[i:i + chunk_chars]}) for i in range(0, len(text), max(1, chunk_chars))]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + chunk_chars]}}]})
                   for i in range(0, len(arguments), max(1, chunk_chars))]
    chunks.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": body.get("usage")})
    return chunks


def http_error(status: int, message: str = "error", headers: dict[str, str] | None = None) -> Reply:
    """An error reply, e.g. ``http_error(429, headers={"Retry-After": "7"})``."""
    body = {"error": {"message": message, "type": "rate_limit_exceeded" if status == 429 else "error", "code": None}}
    return {"status": status, "headers": dict(headers or {}), "body": body, "delay_s": 0.0}


@dataclass(frozen=True)
class Quirks:
    """What a real server refuses or does differently; each refusal is worded as that server words it.

    refuse_tools: "vllm" (started without --enable-auto-tool-choice), "llamacpp" (without --jinja),
    "ollama" (a model without tool support), "openai" (a model without function calling).
    refuse_response_format: "json_schema" (only that type, as older OpenAI models), "all", or
    "llama-cpp-python" (json_schema answered with its 500: pydantic's literal_error at loc body,
    response_format, type; json_object with a schema taken); "llama-cpp-python" also streams no usage.
    reasoning: refuses max_tokens and any temperature but 1, as OpenAI's reasoning models do.
    tool_calls_stop: tool calls arrive with finish_reason "stop" (as Ollama sent them).
    prose: the model-like responder (tests/support/model_like.py) wraps JSON in prose where no
    response_format holds it, and gives reason_act's final answer in prose.
    """

    refuse_tools: str = ""
    refuse_response_format: str = ""
    reasoning: bool = False
    tool_calls_stop: bool = False
    prose: bool = False


def refusal(body: dict[str, Any], quirks: Quirks) -> Reply | None:
    """The 400 a server with ``quirks`` answers ``body`` with, or None when it takes it."""
    tools = bool(body.get("tools"))
    if quirks.refuse_tools == "vllm" and tools and body.get("tool_choice") in (None, "auto"):
        return _vllm_error('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    if quirks.refuse_tools == "llamacpp" and tools:
        return http_error(400, "tools param requires --jinja flag")
    if quirks.refuse_tools == "ollama" and tools:
        return http_error(400, f"registry.ollama.ai/library/{body.get('model')}:latest does not support tools")
    if quirks.refuse_tools == "openai" and tools:
        return http_error(400, "Unsupported parameter: 'tools' is not supported with this model.")
    kind = (body.get("response_format") or {}).get("type")
    if kind == "json_schema" and quirks.refuse_response_format == "llama-cpp-python":
        return {"status": 500, "headers": {}, "delay_s": 0.0, "body": {"error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                       "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
            "type": "internal_server_error", "param": None, "code": None}}}
    if kind in ("json_schema", "json_object") and (quirks.refuse_response_format == "all" or
                                                   kind == quirks.refuse_response_format):
        return http_error(400, f"Invalid parameter: 'response_format' of type '{kind}' is not supported with "
                               "this model.")
    if quirks.reasoning and "max_tokens" in body:
        return http_error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                               "'max_completion_tokens' instead.")
    if quirks.reasoning and body.get("temperature", 1) != 1:
        return http_error(400, f"Unsupported value: 'temperature' does not support {float(body['temperature'])} "
                               "with this model. Only the default (1) value is supported.")
    return None


def _vllm_error(message: str) -> Reply:
    """vLLM's error body: not wrapped in "error"."""
    return {"status": 400, "headers": {}, "delay_s": 0.0,
            "body": {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}}


def prompt_size(body: dict[str, Any]) -> int:
    """The tokens the server counts in a request: the characters of its messages' text and tool calls / 4."""
    chars = sum(len(str(m.get("content") or "")) + len(json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")
                for m in body.get("messages") or [])
    return chars // 4


def context_exceeded(window: int, asked: int) -> Reply:
    """OpenAI's 400 for a prompt over the model's window (``context_length_exceeded``)."""
    message = (f"This model's maximum context length is {window} tokens. However, your messages resulted in "
               f"{asked} tokens. Please reduce the length of the messages.")
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}
    return {"status": 400, "headers": {}, "body": body, "delay_s": 0.0}


# -- /embeddings -------------------------------------------------------------------------------------
EMBEDDING_MODEL = "fake-embed"
EMBEDDING_DIMS = 64
# Words the fake model takes for the same meaning (what a real one learns): they share a dimension.
SYNONYMS = {"automobile": "car", "vehicle": "car", "cars": "car", "auto": "car", "credentials": "key", "keys": "key",
            "password": "key", "secret": "key", "safe": "vault", "locker": "vault", "strongbox": "vault"}
# Words that carry no meaning of their own (a real model all but ignores them).
FUNCTION_WORDS = frozenset("a an the is are was of in on at to for and or i my me we our you your it where what "
                           "when who how did do does".split())


def embedding_of(text: str) -> list[float]:
    """A deterministic unit vector: each content word (synonyms as one) hashed to a dimension."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in FUNCTION_WORDS:
            continue
        vector[zlib.crc32(SYNONYMS.get(word, word).encode()) % EMBEDDING_DIMS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def embeddings_reply(body: dict[str, Any], models: tuple[str, ...]) -> Reply:
    """What OpenAI's /v1/embeddings answers: vectors (base64 float32, as the SDK asks by default, or floats), or
    its 400s (no input, an empty string, a bad encoding_format) and 404 (an unknown model), worded as it words them."""
    model, texts, encoding = body.get("model"), body.get("input"), body.get("encoding_format", "float")
    if texts is None:
        return _invalid("'input' is a required property")
    if model not in models:
        reply = http_error(404, f"The model `{model}` does not exist or you do not have access to it.")
        reply["body"]["error"].update(type="invalid_request_error", code="model_not_found")
        return reply
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or any(not isinstance(t, str) or not t for t in texts):
        return _invalid("'$.input' is invalid. Please check the API reference: "
                        "https://platform.openai.com/docs/api-reference.")
    if encoding not in ("float", "base64"):
        return _invalid(f"'{encoding}' is not one of ['float', 'base64'] - 'encoding_format'")
    data = []
    for index, text in enumerate(texts):
        vector = embedding_of(text)
        value: Any = base64.b64encode(array.array("f", vector).tobytes()).decode() if encoding == "base64" else vector
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(len(t.split()) for t in texts)
    return {"status": 200, "headers": {}, "delay_s": 0.0,
            "body": {"object": "list", "data": data, "model": model,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}}


def _invalid(message: str) -> Reply:
    reply = http_error(400, message)
    reply["body"]["error"].update(type="invalid_request_error", param=None)
    return reply


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a worker ending, a stream closed) is normal here, not a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """The server; ``replies`` are served in order, ``responder(body)`` (if given) after they run out.
    ``quirks``: what it refuses (a refused request is recorded and answered 400; no reply is used).
    ``context_window`` (tokens, ``prompt_size`` + max_tokens): a larger request is refused with a 400,
    as real servers do, and takes no scripted reply."""

    def __init__(self, replies: Iterable[Reply] = (), *, responder: Callable[[dict[str, Any]], Reply] | None = None,
                 quirks: Quirks | None = None, context_window: int = 0, refuse_stream: bool = False,
                 cut_streams: int = 0, embedding_models: tuple[str, ...] = (EMBEDDING_MODEL,)):
        self.context_window = context_window
        self.embedding_models = embedding_models  # what /embeddings knows (another model: its 404)
        self.replies: deque[Reply] = deque(replies)
        self.responder = responder
        self.quirks = quirks or Quirks()
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.refuse_stream = refuse_stream
        # Streams to cut after their first piece with [DONE] and no finish_reason, as llama-cpp-python's
        # server does (interrupt_requests, on by default) when another request waits.
        self.cut_streams = cut_streams
        self.stream_ends: list[str] = []  # "done" or "client closed", one per streamed reply
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            refused = refusal(body, self.quirks)
            if refused is not None:
                return refused
            asked = prompt_size(body) + int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
            if self.context_window and asked > self.context_window:
                return context_exceeded(self.context_window, asked)
            reply = self.replies.popleft() if self.replies else None
        if reply is None and self.responder is not None:
            reply = self.responder(body)
        if reply is None:
            return http_error(500, f"fake server: no scripted reply left for request {len(self.requests)}")
        if self.quirks.tool_calls_stop and reply["status"] == 200:
            for choice in reply["body"].get("choices", []):
                choice["finish_reason"] = "stop"
        return reply

    @property
    def refused(self) -> list[dict[str, Any]]:
        """The requests answered 400 for a quirk."""
        return [body for body in list(self.requests) if refusal(body, self.quirks) is not None]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default log
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"<unparsable>": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.paths.append(self.path)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if body.get("stream") and server.refuse_stream:  # recorded, and no scripted reply used
                    with server._lock:
                        server.requests.append(body)
                        server.arrivals.append(time.monotonic())
                    reply = http_error(400, "stream is not supported by this server")
                    reply["body"]["error"].update(type="invalid_request_error", param="stream")
                elif self.path.endswith("/chat/completions"):
                    reply = server._next(body)
                elif self.path.endswith("/embeddings"):
                    with server._lock:
                        server.requests.append(body)
                    reply = embeddings_reply(body, server.embedding_models)
                else:
                    reply = http_error(404, "no route")
                if reply.get("delay_s"):
                    time.sleep(reply["delay_s"])
                payload = dict(reply["body"])
                if reply["status"] == 200 and "choices" in payload:
                    payload.setdefault("id", f"chatcmpl-{len(server.requests)}")
                    payload.setdefault("model", body.get("model", "fake"))
                if body.get("stream") and reply["status"] == 200:
                    self._stream(payload, reply.get("stream") or {}, body)
                    return
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply["headers"].items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

            def _stream(self, payload: dict[str, Any], options: dict[str, Any], body: dict[str, Any]) -> None:
                include_usage = (bool((body.get("stream_options") or {}).get("include_usage"))
                                 and server.quirks.refuse_response_format != "llama-cpp-python")
                chunks = stream_chunks(payload, chunk_chars=options.get("chunk_chars") or 8,
                                       include_usage=include_usage)
                hold, delay = options.get("hold"), options.get("chunk_delay_s") or 0.0
                with server._lock:
                    if server.cut_streams > 0:
                        server.cut_streams -= 1
                        chunks = chunks[:2]
                end = "done"
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for n, chunk in enumerate(chunks):
                        if n and delay:
                            time.sleep(delay)
                        self._event(f"data: {json.dumps(chunk)}\n\n")
                        if hold is not None and n == 1 and not self._wait(hold):
                            end = "client closed"
                            return
                    self._event("data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    end = "client closed"
                finally:
                    with server._lock:
                        server.stream_ends.append(end)

            def _event(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _wait(self, hold: threading.Event) -> bool:
                """Wait for ``hold``; False as soon as the client hangs up instead."""
                while not hold.wait(0.02):
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                return True

        return Handler
