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
makes the server answer a streamed request 400 as servers without streaming do.  Each
stream's end is recorded in ``stream_ends``: "done", or "client closed" when the client
hung up first.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
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
               chunk_chars: int = 8, chunk_delay_s: float = 0.0, hold: threading.Event | None = None) -> Reply:
    """A 200 reply: ``content`` (a dict is sent as its JSON text) and/or ``tool_calls``, with usage."""
    text = json.dumps(content) if isinstance(content, dict) else content
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {"object": "chat.completion", "created": int(time.time()),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
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


class FakeOpenAI:
    """The server; ``replies`` are served in order, ``responder(body)`` (if given) after they run out."""

    def __init__(self, replies: Iterable[Reply] = (), *, responder: Callable[[dict[str, Any]], Reply] | None = None,
                 refuse_stream: bool = False):
        self.replies: deque[Reply] = deque(replies)
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.refuse_stream = refuse_stream
        self.stream_ends: list[str] = []  # "done" or "client closed", one per streamed reply
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(body)
        return http_error(500, f"fake server: no scripted reply left for request {len(self.requests)}")

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
                else:
                    reply = http_error(404, "no route")
                if reply.get("delay_s"):
                    time.sleep(reply["delay_s"])
                payload = dict(reply["body"])
                if reply["status"] == 200:
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
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                chunks = stream_chunks(payload, chunk_chars=options.get("chunk_chars") or 8,
                                       include_usage=include_usage)
                hold, delay = options.get("hold"), options.get("chunk_delay_s") or 0.0
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
