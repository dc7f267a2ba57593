"""sub_task steps without an actor system: the run stops at them, Admission's tree makes the children,
blocks the parent (holding no slot), fans in their ends, enforces the limits, and cancels a tree."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from pegasus import tracing

from pegasus.admission import Admission, StartRun, StopRun, TransitionNotice
from pegasus.cognitive.grammar import parallel_parts
from pegasus.cognitive.offline import OfflinePlanner, compose_answer
from pegasus.config import Settings
from pegasus.run import Answered, RunSnapshot, SendStage, TaskRun, TaskStopped
from pegasus.store import Store
from pegasus.task import InvalidStateTransition, Plan, PlanStep, TaskContext, TaskFSM
from pegasus.task.names import CognitiveState as S, LifecycleState as L, StageName
from tests.pegasus.conftest import FixedClock, Ids, start_run


def make(store: Store | None = None, **overrides: Any) -> Admission:
    counter = itertools.count(1)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    return Admission(settings, clock=lambda: 100.0, id_factory=lambda: f"t{next(counter)}", store=store)


def sub_plan(*texts: str, respond: bool = True) -> Plan:
    steps = [PlanStep(index=n, description=t, action_type="sub_task", action_params={"text": t})
             for n, t in enumerate(texts)]
    if respond:
        steps.append(PlanStep(index=len(steps), description="respond", action_type="respond"))
    return Plan(goal="g", steps=steps)


def run_of(start: StartRun) -> tuple[TaskRun, list[Any]]:
    state = RunSnapshot(start.snapshot, start.run, 5, start.generation, start.journal, 0)
    run, commands = start_run(state, resume_event=start.resume_event, resume_payload=start.resume_payload,
                                  clock=FixedClock(), ids=Ids())
    assert run is not None
    return run, commands


def plans(admission: Admission, start: StartRun, plan: Plan) -> list[Any]:
    """The task of ``start`` runs to its plan (``plan``) and on: the effects of its run's stop."""
    fsm = TaskFSM.restore(start.snapshot)
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE"):
        fsm.transition(event)
    fsm.transition("PLAN_DONE", plan=plan.model_dump(mode="json"))
    _, commands = run_of(StartRun(start.task_id, start.run, fsm.snapshot(), start.generation, journal=start.journal))
    [stop] = [c for c in commands if isinstance(c, TaskStopped)]
    return admission.on_stopped(stop.task_id, stop.run, stop.state, stop.snapshot, stop.exit_reason, stop.children)


def completes(admission: Admission, start: StartRun, result: str = "ok") -> list[Any]:
    fsm = TaskFSM.restore(start.snapshot)
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE", "PLAN_DONE", "ACT_DONE"):
        fsm.transition(event)
    fsm.transition("REFLECT_DONE", verdict="complete", final_result=result)
    return admission.on_stopped(start.task_id, start.run, fsm.state, fsm.snapshot(), None)


def starts(effects: list[Any]) -> list[StartRun]:
    return [e for e in effects if isinstance(e, StartRun)]


def parent_waiting_on_a_child(store: Store) -> tuple[Admission, StartRun, StartRun]:
    """A parent whose plan made one child, its waiting snapshot stored as a restart will find it."""
    from pegasus.store.checkpoint import encode_full

    admission = make(store)
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    [child] = starts(plans(admission, parent, sub_plan("a")))
    waiting = admission.records[parent.task_id].snapshot
    store.add_checkpoint(parent.task_id, parent.run, "full", waiting.state, encode_full(waiting))
    return admission, parent, child


def lifecycle(effects: list[Any], task_id: str) -> list[str]:
    return [e.to_state for e in effects if isinstance(e, TransitionNotice) and e.machine == "lifecycle"
            and e.task_id == task_id]


# -- the run core ------------------------------------------------------------------------------------


def test_a_run_stops_at_consecutive_sub_task_steps_and_sends_none_to_a_worker() -> None:
    fsm = TaskFSM.create("classic", "x", task_id="p")
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE"):
        fsm.transition(event)
    fsm.transition("PLAN_DONE", plan=sub_plan("a", "b").model_dump(mode="json"))
    run, commands = run_of(StartRun("p", 1, fsm.snapshot(), "1.0"))
    assert not [c for c in commands if isinstance(c, SendStage)]  # no worker waits for a child
    [stop] = [c for c in commands if isinstance(c, TaskStopped)]
    assert stop.state == S.ACTING and run.stopped
    assert [(c.key, c.step_index, c.params) for c in stop.children] == [
        ("p/a1.0/i0/r0/s0", 0, {"text": "a"}), ("p/a1.0/i0/r0/s1", 1, {"text": "b"})]


def test_a_later_reason_act_round_makes_a_new_child_for_its_step_0_not_the_first_rounds_answer() -> None:
    fsm = TaskFSM.create("reason_act", "x", task_id="p")
    fsm.transition("TASK_CREATED")
    fsm.transition("REASON_DONE", plan=sub_plan("a", respond=False).model_dump(mode="json"))
    [stop] = [c for c in run_of(StartRun("p", 1, fsm.snapshot(), "1.0"))[1] if isinstance(c, TaskStopped)]
    [first] = stop.children
    end = {"event_type": "TOOL_CALL_COMPLETED", "payload": {"result": {
        "step_index": 0, "action_type": "sub_task", "tool": "sub_task", "params": {"text": "a"}, "success": True,
        "output": "A"}}}
    run, commands = run_of(StartRun("p", 2, stop.snapshot, "1.0", journal={first.key: {"status": "finished",
                                                                                         "result": end}}))
    [send] = [c for c in commands if isinstance(c, SendStage)]  # replayed, then back to reasoning
    assert send.stage == StageName.REASON and run.fsm.context.actions_done[0].output == "A"
    answer = type("Answer", (), {"task_id": "p", "token": send.token, "stage": "reason", "ok": True,
                                 "event_type": "REASON_DONE", "error": None, "error_kind": "", "worker": {},
                                 "payload": {"plan": sub_plan("b", respond=False).model_dump(mode="json")}})()
    [again] = [c for c in run.step(Answered(answer)) if isinstance(c, TaskStopped)]
    [second] = again.children
    assert (first.key, second.key) == ("p/a1.0/i0/r0/s0", "p/a1.0/i0/r1/s0") and second.params == {"text": "b"}


# -- fan-out, fan-in, a parent that holds nothing --------------------------------------------------------


def test_with_one_active_slot_a_parent_with_five_children_completes(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"), runtime={"max_active_tasks": 1})
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    effects = plans(admission, parent, sub_plan(*(f"echo {n}" for n in range(5))))
    assert lifecycle(effects, parent.task_id)[0] == L.BLOCKED  # waiting, its slot free
    assert admission.running == {starts(effects)[0].task_id}  # the first child took the one slot
    children = [link.child_id for link in admission.store.children_of(parent.task_id)]
    assert len(children) == 5 and admission.tree.view_of(parent.task_id)["waiting_for"] == children
    # a page of ``list`` names each sub-task's parent in one query (the dashboard nests them)
    assert admission.store.parents_of([parent.task_id, *children, "unknown"]) == dict.fromkeys(children, parent.task_id)
    for n in range(5):
        [child] = starts(effects)
        assert child.task_id == children[n] and len(admission.running) == 1
        effects = completes(admission, child, f"answer {n}")
    [again] = starts(effects)  # the last child's end queued the parent and gave it the slot
    assert again.task_id == parent.task_id and lifecycle(effects, parent.task_id) == [L.QUEUED, L.RUNNING]
    run, commands = run_of(again)  # the new run replays the children's ends as the steps' results
    [send] = [c for c in commands if isinstance(c, SendStage)]
    assert send.stage == StageName.ACT and send.step_index == 5  # the respond step
    results = run.fsm.context.actions_done
    assert [(r.action_type, r.success, r.output) for r in results] == [
        ("sub_task", True, f"answer {n}") for n in range(5)]
    assert "echo 3: answer 3" in compose_answer(run.fsm.context)


def test_a_child_is_made_once_per_step_key_even_when_the_parent_asks_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    admission = make(store)
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    fsm = TaskFSM.restore(parent.snapshot)
    for event in ("TASK_CREATED", "PERCEIVE_DONE", "THINK_DONE"):
        fsm.transition(event)
    fsm.transition("PLAN_DONE", plan=sub_plan("a", "b").model_dump(mode="json"))
    [stop] = [c for c in run_of(StartRun(parent.task_id, parent.run, fsm.snapshot(), "1.0"))[1]
              if isinstance(c, TaskStopped)]
    admission.on_stopped(stop.task_id, stop.run, stop.state, stop.snapshot, None, stop.children)
    made = [link.child_id for link in store.children_of(parent.task_id)]
    # A crash before the parent's blocked state was committed: restored running, its new run asks again.
    store.update_task(parent.task_id, lifecycle_state=L.RUNNING)
    fresh = make(store)
    [restarted] = [s for s in starts(fresh.restore()) if s.task_id == parent.task_id]
    effects = fresh.on_stopped(parent.task_id, restarted.run, stop.state, stop.snapshot, None, stop.children)
    assert [link.child_id for link in store.children_of(parent.task_id)] == made  # none made twice
    assert lifecycle(effects, parent.task_id) == [L.BLOCKED]
    assert not [s for s in starts(effects) if s.task_id not in made]


def test_a_restart_finds_a_childs_end_the_parents_journal_lost_and_queues_the_parent(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    admission, parent, child = parent_waiting_on_a_child(store)
    # The child ended, and the crash came before its end reached the parent's journal.
    store.update_task(child.task_id, lifecycle_state=L.DONE, result="A")
    assert store.journal(parent.task_id) == {}
    fresh = make(store)
    [again] = [s for s in starts(fresh.restore()) if s.task_id == parent.task_id]
    run, _ = run_of(again)
    assert [(r.success, r.output) for r in run.fsm.context.actions_done] == [(True, "A")]


def test_a_failed_child_is_a_failed_step_for_the_reflection(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"))
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    [child] = starts(plans(admission, parent, sub_plan("read /nope")))
    fsm = TaskFSM.restore(child.snapshot)
    fsm.transition("TASK_CREATED")
    fsm.transition("TASK_FAILED", error="no such file")
    [again] = starts(admission.on_stopped(child.task_id, child.run, fsm.state, fsm.snapshot(), "exception"))
    run, _ = run_of(again)
    [result] = run.fsm.context.actions_done
    assert not result.success and "failed: no such file" in (result.error or "")
    assert run.fsm.history[-1].trigger_event_type == "TOOL_CALL_FAILED"


def test_under_manual_approval_children_are_approved_with_their_parent(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"), runtime={"approval_policy": "manual"})
    record, _ = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(admission.approve(record.task_id))
    effects = plans(admission, parent, sub_plan("a", "b"))
    children = [link.child_id for link in admission.store.children_of(parent.task_id)]
    assert [s.task_id for s in starts(effects)] == children
    assert all(lifecycle(effects, child)[:3] == [L.DRAFT, L.APPROVED, L.QUEUED] for child in children)


# -- limits --------------------------------------------------------------------------------------------------


def test_a_child_past_max_depth_is_refused_with_a_failed_step_naming_the_limit(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"), subtasks={"max_depth": 1})
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [child] = starts(plans(admission, starts(effects)[0], sub_plan("deeper")))
    effects = plans(admission, child, sub_plan("too deep"))  # the child (depth 1) asks for a grandchild
    assert admission.store.children_of(child.task_id) == []
    [again] = starts(effects)  # refused at once: the child goes on with a failed step
    run, _ = run_of(again)
    [result] = run.fsm.context.actions_done
    assert not result.success and "[subtasks] max_depth is 1" in (result.error or "")


def test_children_past_max_children_are_refused(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"), subtasks={"max_children": 2})
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    plans(admission, parent, sub_plan("a", "b", "c"))
    assert len(admission.store.children_of(parent.task_id)) == 2
    [row] = [r for r in admission.store.journal(parent.task_id).values() if r["step_index"] == 2]
    assert "[subtasks] max_children is 2" in row["result"]["payload"]["result"]["error"]


def test_a_child_workspace_may_only_narrow_the_parents(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"))
    _, effects = admission.submit("parent", "classic", 5, {"workspace": "/w/p"}, "cli")
    plan = Plan(goal="g", steps=[
        PlanStep(index=0, description="in", action_type="sub_task", action_params={"text": "a", "metadata": {"workspace": "sub"}}),
        PlanStep(index=1, description="out", action_type="sub_task", action_params={"text": "b", "metadata": {"workspace": "../x"}}),
        PlanStep(index=2, description="same", action_type="sub_task", action_params={"text": "c"})])
    [parent] = starts(effects)
    plans(admission, parent, plan)
    links = admission.store.children_of(parent.task_id)
    workspaces = [admission.records[link.child_id].snapshot.context.input_metadata["workspace"] for link in links]
    assert workspaces == ["/w/p/sub", "/w/p"]
    [refused] = [r for r in admission.store.journal(parent.task_id).values() if r["step_index"] == 1]
    assert "outside its parent's /w/p" in refused["result"]["payload"]["result"]["error"]



def test_a_sub_task_is_in_its_parents_trace_under_the_run_that_made_it(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"))
    _, effects = admission.submit("parent", "classic", 5, {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}, "http")
    [parent] = starts(effects)
    plans(admission, parent, sub_plan("a", respond=False))
    [link] = admission.store.children_of(parent.task_id)
    child = tracing.task_trace(link.child_id, admission.records[link.child_id].lifecycle.metadata)
    assert (child.trace_id, child.parent_span_id) == ("a" * 32, tracing.run_span_id(parent.task_id, parent.run))


# -- control over the tree ---------------------------------------------------------------------------------


def test_cancel_of_a_parent_cancels_its_descendants_and_suspend_is_refused_while_it_waits(tmp_path: Path) -> None:
    admission = make(Store(tmp_path / "p.db"), runtime={"max_active_tasks": 2})
    _, effects = admission.submit("parent", "classic", 5, {}, "cli")
    [parent] = starts(effects)
    effects = plans(admission, parent, sub_plan("a", "b", "c"))
    [first, second] = starts(effects)
    grandchildren = starts(plans(admission, first, sub_plan("deep")))
    with pytest.raises(InvalidStateTransition, match="waiting for its sub-tasks"):
        admission.suspend(parent.task_id, "no")
    effects = admission.cancel(parent.task_id, "enough")
    everyone = [parent.task_id, *[link.child_id for link in admission.store.children_of(parent.task_id)],
                grandchildren[0].task_id]
    assert [admission.get(t).state for t in everyone] == [L.CANCELED] * 5
    assert {e.task_id for e in effects if isinstance(e, StopRun)} == {second.task_id, grandchildren[0].task_id}
    assert admission.running == set()
    # The canceled child's late end changes nothing.
    assert completes(admission, second) == []


# -- the offline grammar ---------------------------------------------------------------------------------


def test_in_parallel_plans_one_sub_task_step_per_part_then_respond() -> None:
    assert parallel_parts("in parallel: what is 2+2; echo hi;  count the lines in setup.cfg") == [
        "what is 2+2", "echo hi", "count the lines in setup.cfg"]
    assert parallel_parts("echo in parallel: a") == []
    plan = OfflinePlanner().run(TaskContext(input_text="In parallel: echo a; echo b"))
    assert [(s.action_type, s.action_params) for s in plan.steps] == [
        ("sub_task", {"text": "echo a"}), ("sub_task", {"text": "echo b"}), ("respond", {})]


def test_a_part_in_parentheses_is_taken_whole_so_a_part_may_be_a_tree() -> None:
    assert parallel_parts("in parallel: (in parallel: echo a; echo b); (2+3)*(4); (what is 1+1)") == [
        "in parallel: echo a; echo b", "(2+3)*(4)", "what is 1+1"]


def test_the_model_planner_takes_sub_task_steps_with_the_limits_in_its_prompts() -> None:
    from pydantic import ValidationError

    from pegasus.cognitive.llm import PlanReply, StepReply
    from pegasus.llm import prompts
    from pegasus.task import ActionResult

    reply = PlanReply.model_validate({"steps": [{"action_type": "sub_task", "text": "sum the logs", "machine": "reason_act"},
                                                {"action_type": "respond"}]})
    assert (reply.steps[0].action_type, reply.steps[0].machine) == ("sub_task", "reason_act")
    with pytest.raises(ValidationError, match="needs the text of its task"):
        StepReply(action_type="sub_task")
    rule = prompts.sub_task_rule(3, 16)
    assert "at most 16 sub-tasks per task, nested at most 3 deep" in rule and prompts.sub_task_rule(0, 16) == ""
    context = TaskContext(input_text="x", actions_done=[ActionResult(
        step_index=0, action_type="sub_task", tool="sub_task", params={"text": "a"}, success=True, output="A")])
    assert rule in prompts.plan_messages(context, [], sub_tasks=rule)[0]["content"]
    messages = prompts.reason_messages(context, sub_tasks=rule)
    assert rule in messages[0]["content"] and messages[-1]["content"].startswith("Sub-task result:")
    assert '"output": "A"' in messages[-1]["content"]
