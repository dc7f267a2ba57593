"""Scenario: a real model (issue 29) -- SmolLM2-135M on llama-cpp-python's server, through Pegasus and straight.

N simple tasks per machine on a system with the shipped defaults plus ``provider``, ``base_url`` and
``model``, reaching the server through a recording pass-through; then the requests answered whole are sent
straight, in the same order, at the concurrency Pegasus held it to, so both sides do the same work (checked:
completion tokens within 5%).  Target: Pegasus's completion tokens/s >= 0.9 of straight.  Only when named
(``--only realmodel``); skipped, saying why, without llama-cpp-python or the GGUF.  The rules in full:
docs/performance.md, "What each scenario measures".
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.common import check, pegasus_system, percentile, state_dir
from pegasus.config import Settings
from pegasus.llm import capabilities
from tests.support import smollm2

NAME = "realmodel"
TASKS = ("what is 17 * 23?", "what is 12 + 30?", "hello!", "good morning, how are you?",
         "echo pegasus", "repeat after me: blue sky")
MACHINES = ("classic", "reason_act")
SETTLED = frozenset({"done", "failed", "canceled", "blocked"})
QUIET_S = 5.0  # no request for this long once every task settled: post-task reflections are over


def _tokens(body: bytes, content_type: str) -> tuple[int, bool]:
    """Completion tokens of one reply (its usage, or one per streamed chunk with text), and whether it was
    whole (a stream that says why it ended; llama-cpp-python cuts one short without a finish_reason)."""
    if "event-stream" in content_type:
        count, whole = 0, False
        for line in body.decode(errors="replace").splitlines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                choices = chunk.get("choices") or []
                count += any((choice.get("delta") or {}).get("content") for choice in choices)
                whole = whole or any(choice.get("finish_reason") for choice in choices)
        return count, whole
    try:
        return int(json.loads(body).get("usage", {}).get("completion_tokens") or 0), True
    except (ValueError, AttributeError):
        return 0, False


def _open(upstream: str, path: str, body: bytes) -> Any:
    """The upstream reply, open (an HTTPError is a reply too: its status and body)."""
    request = urllib.request.Request(upstream + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(request, timeout=600)
    except urllib.error.HTTPError as exc:
        return exc


def _pieces(reply: Any) -> Iterator[bytes]:
    """The reply's body as it arrives; a stream the server cut short ends where it was cut."""
    with contextlib.closing(reply):
        while True:
            try:
                piece = reply.read1(65536)
            except (http.client.IncompleteRead, ConnectionError):
                return
            if not piece:
                return
            yield piece


def _send(upstream: str, path: str, body: bytes) -> tuple[int, str, bytes]:
    reply = _open(upstream, path, body)
    return reply.status, reply.headers.get("Content-Type", ""), b"".join(_pieces(reply))


class Recorder:
    """The pass-through (each piece handed on as it arrives, as HTTP/1.0 until the connection closes, so
    a client's read timeouts run as they would straight): every call's path, body, status, times and
    completion tokens."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removesuffix("/v1")
        self.calls: list[dict[str, Any]] = []
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with recorder._lock:
                    recorder.in_flight += 1
                began, got = time.monotonic(), []
                reply = _open(recorder.upstream, self.path, body)
                kind = reply.headers.get("Content-Type", "")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", kind or "application/json")
                    self.end_headers()
                    for piece in _pieces(reply):
                        got.append(piece)
                        self.wfile.write(piece)
                        self.wfile.flush()
                except OSError:
                    pass  # the client went away (its own timeout): recorded as far as it came
                finally:
                    ended = time.monotonic()
                    with recorder._lock:
                        recorder.in_flight -= 1
                        recorder.last_activity = ended
                        tokens, whole = _tokens(b"".join(got), kind)
                        recorder.calls.append({"path": self.path, "body": body, "status": reply.status,
                                               "began": began, "ended": ended, "tokens": tokens,
                                               "whole": reply.status == 200 and whole, "reply": b"".join(got)[:4000]})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="realmodel-recorder")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @contextlib.contextmanager
    def running(self) -> Iterator[Recorder]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()

    def wait_quiet(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.in_flight == 0 and time.monotonic() - self.last_activity >= QUIET_S:
                    return
            time.sleep(0.2)


def refused(calls: list[dict[str, Any]]) -> int:
    """Requests the server refused a parameter of (what the ladder stepped on), read as Pegasus reads them."""
    count = 0
    for call in calls:
        if call["status"] in (400, 422, 500):
            sent = json.loads(call["body"]).keys()
            count += capabilities.named(call["reply"].decode(errors="replace"), sent) is not None
    return count


def _through_pegasus(url: str, per_machine: int) -> dict[str, Any]:
    recorder = Recorder(url)
    with recorder.running(), state_dir() as state, pegasus_system(state, {
            "llm": {"provider": "openai", "base_url": recorder.url, "model": smollm2.ALIAS},
            "tools": {"plugins": []}}) as system:
        client = system.client
        began = time.monotonic()
        ids = {machine: [client.submit(TASKS[n % len(TASKS)], machine=machine)["task_id"] for n in range(per_machine)]
               for machine in MACHINES}
        tasks = {machine: [client.wait(task_id, timeout=1800, until=SETTLED) for task_id in found]
                 for machine, found in ids.items()}
        recorder.wait_quiet()
        calls = list(recorder.calls)
        ended = max([call["ended"] for call in calls] + [began])
    stages = [s for found in tasks.values() for t in found for s in t["stages"] if s.get("usage")]
    return {"tasks": tasks, "calls": calls, "wall_s": ended - began, "stages": stages}


def _straight(url: str, calls: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """The same requests sent straight, ``concurrency`` at a time: each body as Pegasus sent it (its
    temperature 0 decodes greedily, so the server writes the same tokens: equal work, checked by the
    caller)."""
    upstream = url.removesuffix("/v1")

    def one(call: dict[str, Any]) -> tuple[int, int, bool]:
        status, kind, reply = _send(upstream, call["path"], call["body"])
        return (status, *_tokens(reply, kind))

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, calls))
    return {"wall_s": time.monotonic() - began, "tokens": sum(tokens for _, tokens, _ in results),
            "ok": sum(status == 200 and whole for status, _, whole in results)}


def serial(calls: list[dict[str, Any]]) -> bool:
    """Whether the server decoded one request at a time (it cut a stream short because another waited): then
    Pegasus's pool sent it one at a time, and so is it asked straight (at more, it cuts the straight streams
    short too, and the two sides no longer do the same work: issue 30)."""
    return any(call["status"] == 200 and not call["whole"] for call in calls)


def _said(task: dict[str, Any]) -> str:
    """What a task ended with: its error, its question, or its result (cut)."""
    return str(task.get("error") or task.get("question") or task.get("result"))[:100]


def skipped(reason: str) -> dict[str, Any]:
    return {"figures": {"skipped": reason}, "checks": [check(f"skipped: {reason}", None, "")],
            "notes": [f"realmodel: skipped: {reason}"]}


def run(quick: bool) -> dict[str, Any]:
    reason = smollm2.missing()
    if reason:
        return skipped(reason)
    per_machine = 1 if quick else len(TASKS)
    with state_dir("pegasus-bench-llama-") as logs:
        try:
            with smollm2.served(Path(logs) / "server.log") as url:
                pegasus = _through_pegasus(url, per_machine)
                calls = pegasus["calls"]
                concurrency = 1 if serial(calls) else Settings().pools.llm_workers
                answered = [call for call in calls if call["whole"]]  # the work Pegasus got done
                direct = _straight(url, answered, concurrency)
        except smollm2.BrokenBuild as exc:
            return skipped(str(exc))
    stages = pegasus["stages"]
    tokens = sum(call["tokens"] for call in answered)
    done = {machine: sum(t["lifecycle_state"] == "done" for t in found) / len(found)
            for machine, found in pegasus["tasks"].items()}
    latency = [s["finished"] - s["started"] for s in stages if "started" in s and "finished" in s]
    ladder = sorted({step for s in stages for step in s["usage"].get("ladder", [])})
    # Equal work, compared per token: the answered requests through Pegasus (its wall time includes the
    # refused and cut ones, its own cost) against the same requests straight.
    rate = {"pegasus": tokens / pegasus["wall_s"], "direct": direct["tokens"] / direct["wall_s"]}
    ratio = rate["pegasus"] / rate["direct"] if rate["direct"] else 0.0
    same_work = direct["tokens"] / tokens if tokens else 0.0
    figures = {
        "tasks_per_machine": per_machine, "concurrency": concurrency, "requests": len(calls),
        "requests_answered": len(answered), "same_work": round(same_work, 3),
        "done_share": done, "states": {m: [(t["lifecycle_state"], _said(t)) for t in found]
                                       for m, found in pegasus["tasks"].items()},
        "stage_latency_p50_s": round(percentile(latency, 50), 3),
        "stage_latency_p99_s": round(percentile(latency, 99), 3),
        "refused_requests": {smollm2.ALIAS + " @ llama-cpp-python": refused(calls)}, "ladder_steps": ladder,
        "completion_tokens": tokens, "direct_completion_tokens": direct["tokens"], "direct_ok": direct["ok"],
        "pegasus_wall_s": round(pegasus["wall_s"], 1), "direct_wall_s": round(direct["wall_s"], 1),
        "tokens_per_s_pegasus": round(tokens / pegasus["wall_s"], 2),
        "tokens_per_s_direct": round(direct["tokens"] / direct["wall_s"], 2),
        "throughput_ratio": round(ratio, 3),
    }
    checks = [
        *(check(f"{machine}: share of tasks done", share, "", "> 0.8", share > 0.8) for machine, share in done.items()),
        check("model stage latency p50", figures["stage_latency_p50_s"], "s"),
        check("model stage latency p99", figures["stage_latency_p99_s"], "s"),
        check("completion tokens/s through Pegasus", figures["tokens_per_s_pegasus"], "tok/s"),
        check("completion tokens/s, the same requests straight", figures["tokens_per_s_direct"], "tok/s"),
        check("requests the server refused (the ladder's steps)", sum(figures["refused_requests"].values()), "reqs"),
        check("the same work both ways (completion tokens straight / through Pegasus)", same_work, "x",
              "0.95-1.05", 0.95 <= same_work <= 1.05),
        check("Pegasus throughput / direct (completion tokens/s, the same requests)", ratio, "x", ">= 0.9",
              ratio >= 0.9),
    ]
    return {"figures": figures, "checks": checks, "notes": [
        f"realmodel: {per_machine} tasks per machine on SmolLM2-135M (llama-cpp-python, Q4_1), shipped defaults plus "
        f"provider/base_url/model; {len(calls)} requests through Pegasus (first submit to last reply, post-task "
        f"reflections included), then the {len(answered)} it got answered whole sent straight to the server, "
        f"{concurrency} at a time (1: the server decodes one at a time, as Pegasus learnt)."]}
