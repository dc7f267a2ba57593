"""OpenTelemetry traces of a real system (``[telemetry]``, actors/telemetry.py) received by a real OTLP/HTTP
receiver (tests/support/otlp.py): a classic task submitted over HTTP with a ``traceparent`` is one trace, with
every stage, model call and tool call, and ``status`` names it."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import httpx
import pytest

from actors.runtime import procs
from pegasus.tracing import run_span_id
from tests.support import hold
from tests.support.fake_openai import FakeOpenAI, completion, tool_call
from tests.support.otlp import Receiver, need_telemetry
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PARENT_TRACE, PARENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
CLASSIC_STAGES = ["perceive", "think", "plan", "act", "act", "reflect"]


def _config(server: FakeOpenAI, receiver: Receiver, http_port: int) -> str:
    return f"""
[llm]
provider = "openai"
base_url = "{server.url}"
model = "test-model"
api_key_env = ""
max_retries = 0
[memory]
reflector = false
[http]
enabled = true
port = {http_port}
[telemetry]
enabled = true
endpoint = "{receiver.endpoint}"
export_delay_ms = 100
"""


def _one_trace(spans: list[dict[str, Any]], task_id: str) -> dict[str, Any] | None:
    """The task's spans once its run span, its six stages and their calls have all arrived."""
    mine = [s for s in spans if s["traceId"] == PARENT_TRACE]
    runs = [s for s in mine if s["name"] == "task classic"]
    stages = sorted((s for s in mine if s["name"].startswith("stage ")), key=lambda s: int(s["startTimeUnixNano"]))
    calls = [s for s in mine if s["name"].startswith(("chat ", "execute_tool "))]
    if len(runs) == 1 and len(stages) == len(CLASSIC_STAGES) and len(calls) == 5:
        return {"run": runs[0], "stages": stages, "calls": calls}
    return None


def test_a_classic_task_is_one_trace_of_its_stages_model_calls_and_tool_calls(cli, tmp_path) -> None:
    need_telemetry()
    receiver = Receiver(tmp_path)
    try:
        with FakeOpenAI() as server:
            server.script(
                completion({"task_type": "math", "intents": ["multiply"], "entities": {"numbers": [6, 7]}}),
                completion({"need_more_info": False, "approach": "use arithmetic"}),
                completion(tool_calls=[tool_call("arithmetic", {"expression": "6 * 7"})]),
                completion({"verdict": "complete", "assessment": "computed"}, prompt_tokens=30, completion_tokens=5),
            )
            http_port = procs.free_port()
            (cli.home / "pegasus.toml").write_text(_config(server, receiver, http_port))
            cli.ok("start")
            cli.track()
            token = cli.json("token", "create", "tracer", "--scope", "admin")["token"]
            base = f"http://127.0.0.1:{http_port}"
            wait_for(lambda: _up(base), 60, "the gateway")
            answer = httpx.post(f"{base}/v1/tasks", json={"text": "what is six times seven?", "machine": "classic"},
                                headers={"Authorization": f"Bearer {token}",
                                         "traceparent": f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"}, timeout=30)
            assert answer.status_code == 201, answer.text
            task_id = answer.json()["task_id"]
            task = cli.wait_for(task_id, {"done", "failed"})
            assert (task["lifecycle_state"], task["result"]) == ("done", "6 * 7 = 42"), task.get("error")
            assert task["trace_id"] == PARENT_TRACE  # status --json
            assert f"trace:     {PARENT_TRACE}" in cli.ok("status", task_id)  # status's text
            page = httpx.get(f"{base}/v1/tasks/{task_id}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
            assert page.json()["trace_id"] == PARENT_TRACE  # what the dashboard's task page shows

            trace = wait_for(lambda: _one_trace(receiver.spans(), task_id), 60, "the task's spans")
    finally:
        receiver.close()
    run, stages, calls = trace["run"], trace["stages"], trace["calls"]
    # The run: the submit's span as parent, its id derived from the task and run, its outcome.
    assert run["parentSpanId"] == PARENT_SPAN
    assert run["spanId"] == run_span_id(task_id, run["attributes"]["pegasus.task.run"])
    assert run["attributes"]["pegasus.task.id"] == task_id and run["attributes"]["pegasus.outcome"] == "completed"
    assert [s["attributes"]["pegasus.stage"] for s in stages] == CLASSIC_STAGES
    assert {s["parentSpanId"] for s in stages} == {run["spanId"]}
    assert {s["attributes"]["pegasus.pool"] for s in stages} == {"llm", "tool"}
    by_id = {s["spanId"]: s["attributes"]["pegasus.stage"] for s in stages}
    models = sorted((c for c in calls if c["name"] == "chat test-model"), key=lambda c: int(c["startTimeUnixNano"]))
    assert [by_id[c["parentSpanId"]] for c in models] == ["perceive", "think", "plan", "reflect"]
    for call, finish, tokens in zip(models, ["stop", "stop", "tool_calls", "stop"], [(11, 7)] * 3 + [(30, 5)]):
        attributes = call["attributes"]
        assert call["kind"] == 3  # SPAN_KIND_CLIENT
        assert (attributes["gen_ai.operation.name"], attributes["gen_ai.request.model"]) == ("chat", "test-model")
        assert attributes["gen_ai.response.model"] == "test-model"
        assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == tokens
        assert attributes["gen_ai.response.finish_reasons"] == [finish]
        assert attributes["server.address"] == "127.0.0.1"
    tools = [c for c in calls if c["name"] == "execute_tool arithmetic"]
    assert len(tools) == 1 and by_id[tools[0]["parentSpanId"]] == "act", json.dumps(calls)
    assert tools[0]["attributes"]["gen_ai.tool.name"] == "arithmetic"
    assert tools[0]["attributes"]["pegasus.tool.effect"] == "pure"
    for span in [run, *stages, *calls]:
        assert span["status"]["code"] != 2, span  # none failed
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"])


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _runs(spans: list[dict[str, Any]], task_id: str) -> dict[int, dict[str, Any]]:
    """The task's run spans by run (a second one of a run would be a duplicate: refused here)."""
    runs: dict[int, dict[str, Any]] = {}
    for span in spans:
        if span["name"].startswith("task ") and span["attributes"]["pegasus.task.id"] == task_id:
            assert span["attributes"]["pegasus.task.run"] not in runs, f"a second span of one run: {span}"
            runs[span["attributes"]["pegasus.task.run"]] = span
    return runs


def _stages(spans: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith("stage ") and s["attributes"]["pegasus.task.id"] == task_id]


def test_every_run_that_ends_sends_its_span_once_and_an_unsampled_caller_gets_none(pegasus, tmp_path) -> None:
    """Canceled mid-run, its task actor SIGKILLed, waiting for sub-tasks, done: each run's span arrives, once,
    with its outcome, and every stage span has its parent.  A caller's traceparent with the sampled flag off
    (-00): nothing of that task nor of its sub-tasks is sent, while the same tree sampled (-01) is."""
    need_telemetry()
    receiver = Receiver(tmp_path)
    try:
        client = pegasus(runtime={"max_active_tasks": 4}, memory={"reflector": False}, tools={"plugins": [hold.PLUGIN]},
                         telemetry={"enabled": True, "endpoint": receiver.endpoint, "export_delay_ms": 100})
        unsampled, sampled = (f"00-{trace}-{PARENT_SPAN}-{flags}" for trace, flags in
                              (("1" * 32, "00"), (PARENT_TRACE, "01")))
        quiet = client.submit("in parallel: echo a; echo b", metadata={"traceparent": unsampled})["task_id"]
        assert client.wait(quiet, timeout=60)["lifecycle_state"] == "done"
        loud = client.submit("in parallel: echo a; echo b", metadata={"traceparent": sampled})["task_id"]
        assert client.wait(loud, timeout=60)["lifecycle_state"] == "done"
        children = client.get(loud)["children"]
        # The sampled tree: the parent's run that waited for its children, its last run, and each child's.
        tree = wait_for(lambda: (lambda spans: spans if len(_runs(spans, loud)) == 2 and all(
            _runs(spans, child) for child in children) else None)(receiver.spans()), 60, "the sampled tree's spans")
        assert _runs(tree, loud)[1]["attributes"]["pegasus.outcome"] == "waiting_for_sub_tasks"
        assert {s["traceId"] for s in tree if s["attributes"].get("pegasus.task.id") in (loud, *children)} == \
            {PARENT_TRACE}

        # Canceled while its sleep step runs: its run span says so, and its stages' parent is that span.
        canceled = client.submit("sleep 30")["task_id"]
        wait_for(lambda: _stages(receiver.spans(), canceled), 60, "a stage of the task to end")
        client.cancel(canceled, "enough")
        [run] = wait_for(lambda: list(_runs(receiver.spans(), canceled).values()), 60, "the canceled run's span").copy()
        assert (run["attributes"]["pegasus.outcome"], run["spanId"]) == ("canceled", run_span_id(canceled, 1))

        # Its task actor SIGKILLed: the lost run's span (an error), then the run that went on elsewhere (its
        # step held until the kill: then the step run again ends at once).
        release = tmp_path / "release"
        killed = client.submit(f"call hold_until {json.dumps({'path': str(release)})}")["task_id"]
        actor = wait_for(lambda: (lambda task: task["state"] == "acting" and task["actor_pid"])(client.get(killed)),
                         60, "the task actor in its held step")
        os.kill(actor, signal.SIGKILL)
        release.touch()
        client.wait(killed, timeout=60)
        runs = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(_runs(receiver.spans(), killed)), 60,
                        "the killed run's span and the next one's")
        assert runs[1]["attributes"]["pegasus.outcome"] == "died" and runs[1]["status"]["code"] == 2
        assert runs[2]["attributes"]["pegasus.outcome"] == "completed"

        spans = receiver.spans()
        for task_id in (loud, *children, canceled, killed):
            parents = {s["spanId"] for s in _runs(spans, task_id).values()}
            assert {s["parentSpanId"] for s in _stages(spans, task_id)} <= parents, task_id  # none orphaned
        # Seconds after the unsampled tree ended (its spans would have gone within 100 ms): none of it came.
        assert [s for s in spans if s["traceId"] == "1" * 32] == []
    finally:
        receiver.close()
