"""Scenario 1, hop overhead: the time from one stage's result to the next stage's start.

Offline processors with zero latency, one task at a time (so nothing queues),
for each cognitive machine.  A stage record (``client.get(id)["stages"]``)
carries the worker's ``started`` and ``finished`` wall times (``time.time()``,
one clock: every process is on this host); the hop between two consecutive
stages of one run is ``next.started - previous.finished``.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import check, iso_seconds, pegasus_system, stage_hops, state_dir, summary_ms
from benchmarks.floor import measure_floor

NAME = "hop"
TEXT = "what is 2 + 3 * 4?"
MACHINES = ("classic", "reason_act")
HOP_DEFINITION = (
    "hop = next stage's worker start - previous stage's worker finish (time.time() in the workers). "
    "With the pools in the home host (the default: a task actor runs the pools' cores) it includes: the "
    "worker pickling the StageResult and sending it to the task actor inside its WorkDone (Thespian TCP, "
    "one message); the task actor's pool taking it, the task actor applying the event to its TaskFSM, "
    "making the checkpoint (context delta), its pool handing the next request, with the whole TaskContext, "
    "to an idle worker as Work (second message) and then its TaskReports to the supervisor (which writes "
    "the transition + checkpoint to SQLite -- not awaited, so it is on the path only through the CPU it "
    "takes on 2 cores); the worker unpickling it.  ([pools] home_host = false: the result goes straight to "
    "the task actor, the request to a pool process, which sends the Work: three messages.)  An effectful "
    "tool step adds one more round trip (StepStarting/StepGo to the supervisor, which writes the journal "
    "row first); the workload here has none.  'floor' is three sends between three bare Thespian actors "
    "with a 1 KB payload: Thespian's share.")


def run(quick: bool) -> dict[str, Any]:
    tasks = 5 if quick else 100
    figures: dict[str, Any] = {"tasks_per_machine": tasks, "text": TEXT, "definition": HOP_DEFINITION}
    checks = []
    all_hops: list[float] = []
    with state_dir() as state, pegasus_system(state) as system:
        client = system.client
        for machine in MACHINES:
            client.wait(client.submit(TEXT, machine=machine)["task_id"])  # warm-up: imports, first connections
            hops: list[float] = []
            latencies: list[float] = []
            stages_per_task = 0
            for _ in range(tasks):
                done = client.wait(client.submit(TEXT, machine=machine)["task_id"], timeout=60)
                if done["lifecycle_state"] != "done":
                    raise RuntimeError(f"{machine} task ended {done['lifecycle_state']}: {done.get('error')}")
                hops += stage_hops(done["stages"])
                stages_per_task = len(done["stages"])
                latencies.append(iso_seconds(done["updated_at"]) - iso_seconds(done["created_at"]))
            all_hops += hops
            hop, task = summary_ms(hops), summary_ms(latencies)
            figures[machine] = {"hop": hop, "task_latency": task, "stages_per_task": stages_per_task,
                                "hops_ms": [round(h * 1000, 3) for h in hops]}  # the distribution (--plots)
            checks.append(check(f"{machine} hop p50", hop["p50_ms"], "ms", "<= 2", hop["p50_ms"] <= 2.0))
            checks.append(check(f"{machine} hop p99", hop["p99_ms"], "ms", "<= 10", hop["p99_ms"] <= 10.0))
            checks.append(check(f"{machine} task latency p50 ({stages_per_task} stages)", task["p50_ms"], "ms"))
            checks.append(check(f"{machine} task latency p99", task["p99_ms"], "ms"))
    with state_dir() as state:
        floor = measure_floor(state, 50 if quick else 1000)
    figures["thespian_floor_hop"] = floor
    overall = summary_ms(all_hops)
    figures["all_hops"] = overall
    bare = floor["hop"]
    checks.append(check("Thespian floor hop p50 (3 bare sends + note)", bare["p50_ms"], "ms"))
    checks.append(check("Thespian floor hop p99", bare["p99_ms"], "ms"))
    checks.append(check("floor + report sent before request, p50", floor["hop_report_before"]["p50_ms"], "ms"))
    checks.append(check("floor + report sent after request, p50", floor["hop_report_after"]["p50_ms"], "ms"))
    checks.append(check("Pegasus share of hop p50 (hop - floor)", overall["p50_ms"] - bare["p50_ms"], "ms"))
    return {"figures": figures, "checks": checks, "notes": [HOP_DEFINITION]}
