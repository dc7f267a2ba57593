"""Scenario: a streamed answer -- messages sent per answer, time to the first text vs time to the result.

The local OpenAI-compatible server (tests/support/fake_openai.py) answers each reason_act task's reason call
with a ~600-character answer in 4-character chunks 10 ms apart (a model writing ~100 tokens a second).  A
follower (``Client.follow``) counts the TextDelta messages that reach it and times, from the submit, the
first delta and the task done.  Then the same with ``[llm] stream = false``, the server taking as long
before it sends the whole reply.  Nothing is asserted as a time limit.
"""

from __future__ import annotations

import time
from typing import Any

from actors import messages as m
from benchmarks.common import check, pegasus_system, percentile, state_dir
from tests.support.fake_openai import FakeOpenAI, completion

NAME = "streaming"
# ~600 characters that never repeat a passage ([llm] loop_repeats would stop a reply that does).
ANSWER = " ".join(f"Part {i}: streaming lets a reader start on the answer while the model writes line {i}."
                  for i in range(1, 8))
CHUNK_CHARS, CHUNK_DELAY_S = 4, 0.01


def _measure(stream: bool, tasks: int, chunk_delay_s: float) -> dict[str, Any]:
    with FakeOpenAI() as server, state_dir() as state, pegasus_system(state, {
            "llm": {"provider": "openai", "base_url": server.url, "model": "bench", "api_key_env": "",
                    "max_retries": 0, "stream": stream},
            "memory": {"reflector": False}}) as system:  # the model's calls are scripted: no post-task reflection
        client = system.client
        first, done, messages = [], [], []
        for _ in range(tasks):
            # Not streamed, the model takes as long to write it: the reply comes after that time, whole.
            chunks = (len(ANSWER) + 40) // CHUNK_CHARS
            server.script(completion({"thought": "write it out", "answer": ANSWER}, chunk_chars=CHUNK_CHARS,
                                     chunk_delay_s=chunk_delay_s, delay_s=0.0 if stream else chunks * chunk_delay_s))
            began = time.monotonic()
            task = client.submit("explain streaming", machine="reason_act", follow=True)
            deltas, seen_first, text = 0, None, []
            for notice in client.follow(task["task_id"], timeout=60, subscribe=False):
                if isinstance(notice, m.TextDelta):
                    deltas += 1
                    text.append(notice.text)
                    seen_first = seen_first or time.monotonic() - began
            done.append(time.monotonic() - began)
            view = client.get(task["task_id"])
            if view["result"] != ANSWER:
                raise RuntimeError(f"task {task['task_id']}: {view['lifecycle_state']}: {view.get('error')}")
            if stream and len("".join(text)) <= len(ANSWER):
                raise RuntimeError("the streamed text does not hold the whole reply")
            messages.append(deltas)
            if seen_first is not None:
                first.append(seen_first)
        return {"first_s": first, "done_s": done, "messages": messages,
                "chunks": (len(ANSWER) + 40) // CHUNK_CHARS}


def run(quick: bool) -> dict[str, Any]:
    tasks, delay = (2, 0.001) if quick else (10, CHUNK_DELAY_S)  # quick: the harness, not the figures
    on, off = _measure(True, tasks, delay), _measure(False, tasks, delay)
    ms = lambda values: round(percentile(values, 50) * 1000.0, 1)  # noqa: E731
    figures = {"tasks": tasks, "reply_chars": len(ANSWER) + 40, "server_chunks_per_answer": on["chunks"],
               "deltas_per_answer": on["messages"], "first_delta_p50_ms": ms(on["first_s"]),
               "result_p50_ms_streamed": ms(on["done_s"]), "result_p50_ms_not_streamed": ms(off["done_s"])}
    checks = [
        check("TextDelta messages per streamed answer (p50)", percentile([float(n) for n in on["messages"]], 50),
              "msgs"),
        check("server chunks per answer (one per 4 chars)", on["chunks"], "chunks"),
        check("time to first delta p50 (from submit)", figures["first_delta_p50_ms"], "ms"),
        check("time to result p50, streamed", figures["result_p50_ms_streamed"], "ms"),
        check("time to result p50, stream = false", figures["result_p50_ms_not_streamed"], "ms"),
    ]
    return {"figures": figures, "checks": checks, "notes": [
        f"streaming: reason_act tasks whose one model call streams ~{len(ANSWER) + 40} chars in {CHUNK_CHARS}-char "
        f"chunks {delay * 1000:g} ms apart from the local fake server; times from submit, at the follower."]}
