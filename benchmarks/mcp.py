"""Scenario mcp: what a hung MCP server costs a stage that does not call it, and an MCP call's stage.

Two systems side by side, each with a local OpenAI-compatible server (tests/support/fake_openai.py)
and mcp-server-time (from PyPI, one copy per machine); the second also has a server that never
answers ``initialize`` (retried in the background all along).  Each task is reason_act: the model
calls ``time.get_current_time``, then answers.  Tasks alternate between the two systems.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any

from benchmarks.common import check, pegasus_system, state_dir, summary_ms
from tests.support.fake_openai import FakeOpenAI, completion, tool_call

NAME = "mcp"
HUNG = [sys.executable, "-c", "import time; time.sleep(1e9)"]  # never answers initialize
DEFINITION = ("reason stage = the first reason stage's worker finish - start: it lists the tools for the "
              "model (machine-scope listings, pushed by the machine's MCP host, never waiting for a server). "
              "act stage = the call of time.get_current_time: the worker asks the machine's MCP host actor, "
              "which calls mcp-server-time over stdio, then runs the stage on the answer.")


def _overrides(server: FakeOpenAI, hung: bool) -> dict[str, Any]:
    servers: list[dict[str, Any]] = [{"name": "time", "command": "mcp-server-time"}]
    if hung:
        servers.append({"name": "hung", "command": HUNG[0], "args": HUNG[1:]})
    return {"llm": {"provider": "openai", "base_url": server.url, "model": "bench", "api_key_env": "",
                    "max_retries": 0},
            "pools": {"llm_workers": 1, "tool_workers": 1},
            "memory": {"reflector": False},  # the model's calls are scripted: no post-task reflection
            "mcp": {"servers": servers, "start_timeout_s": 10.0, "retry_backoff_s": 0.5, "retry_backoff_max_s": 2.0}}


def _task(system: Any, server: FakeOpenAI) -> tuple[float, float]:
    return _ended(system, _submit(system, server))


def _submit(system: Any, server: FakeOpenAI) -> str:
    server.script(completion(tool_calls=[tool_call("time__get_current_time", {"timezone": "UTC"})]),
                  completion({"thought": "read the clock", "answer": "now"}))
    return str(system.client.submit("what time is it?", machine="reason_act")["task_id"])


def _ended(system: Any, task_id: str) -> tuple[float, float]:
    """The task's reason and act stages' times, once it is done."""
    done = system.client.wait(task_id, timeout=60)
    if done["lifecycle_state"] != "done":
        raise RuntimeError(f"task ended {done['lifecycle_state']}: {done.get('error')}")
    reason = next(s for s in done["stages"] if s["stage"] == "reason")
    act = next(s for s in done["stages"] if s["stage"] == "act")
    if not act["ok"]:
        raise RuntimeError(f"the MCP call failed: {act.get('error')}")
    return reason["finished"] - reason["started"], act["finished"] - act["started"]


def _called(server: FakeOpenAI) -> bool:
    """Whether the last task's model saw a tool result (its tool was listed and called)."""
    return bool(server.requests) and any(m.get("role") == "tool" for m in server.requests[-1]["messages"])


def run(quick: bool) -> dict[str, Any]:
    if not shutil.which("mcp-server-time"):
        raise RuntimeError("mcp-server-time is not installed (pip install -e .[test])")
    tasks = 5 if quick else 50
    reason: dict[str, list[float]] = {"plain": [], "hung": []}
    act: list[float] = []
    with FakeOpenAI() as plain_llm, FakeOpenAI() as hung_llm, state_dir() as plain_state, state_dir() as hung_state, \
            pegasus_system(plain_state, _overrides(plain_llm, False)) as plain, \
            pegasus_system(hung_state, _overrides(hung_llm, True)) as hung:
        # Warm-up until each system's model was shown the time server's tools and one was called (listings
        # never wait for a start: the first tasks of a system may not see them yet); both systems at once,
        # their servers starting side by side (each its own model server: their scripts never mix).
        deadline, warming = time.monotonic() + 60, [(plain, plain_llm), (hung, hung_llm)]
        while warming:
            if time.monotonic() > deadline:
                raise RuntimeError("the time server's tools were never listed")
            submitted = [(system, server, _submit(system, server)) for system, server in warming]
            for system, _, task_id in submitted:
                _ended(system, task_id)
            warming = [(system, server) for system, server, _ in submitted if not _called(server)]
        for _ in range(tasks):
            for name, system, server in (("hung", hung, hung_llm), ("plain", plain, plain_llm)):
                reason_s, act_s = _task(system, server)
                reason[name].append(reason_s)
                if name == "plain":
                    act.append(act_s)
    with_hung, without, call = summary_ms(reason["hung"]), summary_ms(reason["plain"]), summary_ms(act)
    slower = with_hung["p50_ms"] - without["p50_ms"]
    checks = [check("reason stage p50, a hung MCP server configured", with_hung["p50_ms"], "ms"),
              check("reason stage p50, no hung server", without["p50_ms"], "ms"),
              check("hung server's cost to a stage that does not call it (p50 difference)", slower, "ms",
                    "<= 100", slower <= 100.0),
              check("act stage p50: an MCP call through the machine's host", call["p50_ms"], "ms"),
              check("act stage p99: an MCP call through the machine's host", call["p99_ms"], "ms")]
    figures = {"tasks": tasks, "reason_with_hung": with_hung, "reason_without": without, "mcp_act": call,
               "definition": DEFINITION}
    return {"figures": figures, "checks": checks, "notes": [DEFINITION]}
