"""The offline processors driven through the real state machines with run_stage.

A tiny synchronous driver plays the task actor: it asks run_stage for the stage
the state names, applies the outcome as an Event, and repeats until the task
is suspended or ends.  No actor system is involved.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import msgpack
import pytest

from pegasus.cognitive.offline import OfflineReflector, perceive_text
from pegasus.cognitive.stages import (
    LLM_STAGES,
    TOOL_STAGES,
    Processors,
    StageError,
    StageOutcome,
    offline_processors,
    pool_for,
    run_stage,
)
from pegasus.task import ActionResult, EventType, Plan, PlanStep, Reflection, TaskContext, TaskFSM
from pegasus.llm.prompts import result_view
from pegasus.tools.registry import ToolRegistry
from tests.pegasus.conftest import FixedClock, Ids

STAGE_OF = {"perceiving": "perceive", "thinking": "think", "planning": "plan", "acting": "act",
            "reflecting": "reflect", "reasoning": "reason"}
MACHINES = ("classic", "reason_act")


def _processors() -> Processors:
    return offline_processors(timer=lambda: 0.0)


def drive(fsm: TaskFSM, processors: Processors | None = None, limit: int = 60) -> list[tuple[str, StageOutcome]]:
    """Run stages until the task leaves the working states; the (stage, outcome) list."""
    processors = processors or _processors()
    outcomes = []
    while fsm.state in STAGE_OF:
        assert len(outcomes) < limit, f"no end after {limit} stages: {[o.event_type for _, o in outcomes]}"
        stage = STAGE_OF[fsm.state]
        outcome = run_stage(processors, stage, fsm.context, machine=fsm.machine.name)
        outcomes.append((stage, outcome))
        fsm.transition(outcome.event_type, **outcome.payload)  # ids and times from the FSM's fixed factories
    return outcomes


def start(machine: str, text: str, **metadata: object) -> TaskFSM:
    fsm = TaskFSM.create(machine, text, task_id="t-1", clock=FixedClock(), id_factory=Ids(), **metadata)
    fsm.transition(EventType.TASK_CREATED)
    return fsm


def run(machine: str, text: str, **metadata: object) -> TaskFSM:
    fsm = start(machine, text, **metadata)
    drive(fsm)
    return fsm


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default workspace root is the home directory: here, the test's tmp_path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha beta\ngamma\ndelta epsilon zeta\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    return tmp_path


# -- whole tasks -----------------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINES)
def test_arithmetic_answer(machine: str) -> None:
    """'what is 2 + 3 * 4?' completes with 14 in the answer."""
    fsm = run(machine, "what is 2 + 3 * 4?")
    assert fsm.state == "completed"
    assert fsm.context.final_result == "2 + 3 * 4 = 14"


@pytest.mark.parametrize("machine", MACHINES)
def test_count_lines_of_a_real_file(machine: str, workspace: Path) -> None:
    """Relative paths resolve against the submitting client's workspace."""
    fsm = run(machine, "count the lines in notes.txt", workspace=str(workspace))
    assert fsm.state == "completed" and fsm.context.final_result == "notes.txt: 3 lines"


@pytest.mark.parametrize("machine", MACHINES)
def test_list_a_directory(machine: str, workspace: Path) -> None:
    fsm = run(machine, f"list the files in {workspace}")
    assert fsm.state == "completed"
    assert fsm.context.final_result == f"{workspace} has 2 entries: notes.txt, src/"


@pytest.mark.parametrize("machine", MACHINES)
def test_read_a_file(machine: str, workspace: Path) -> None:
    fsm = run(machine, "read src/app.py", workspace=str(workspace))
    assert fsm.state == "completed" and fsm.context.final_result == "src/app.py:\nprint('hi')\n"


@pytest.mark.parametrize("machine", MACHINES)
def test_several_intents_in_one_request(machine: str, workspace: Path) -> None:
    fsm = run(machine, "count the words in notes.txt and compute 6*7, then echo 'done and dusted'",
              workspace=str(workspace))
    assert fsm.state == "completed"
    assert fsm.context.final_result == "notes.txt: 6 words\n6*7 = 42\ndone and dusted"


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("text", ["help me", "do the thing", "   ", ""])
def test_vague_or_empty_request_asks_then_completes_when_told(machine: str, text: str) -> None:
    """NEED_MORE_INFO suspends with a helpful question; a message with a request resumes it."""
    fsm = run(machine, text)
    assert fsm.state == "suspended"
    question = fsm.context.suspend_reason or ""
    assert "What should I do?" in question and "2 + 3 * 4" in question
    fsm.transition(EventType.MESSAGE_RECEIVED, text="sorry: what is 6 * 7?")
    drive(fsm)
    assert fsm.state == "completed" and fsm.context.final_result == "6 * 7 = 42"


@pytest.mark.parametrize("machine", MACHINES)
def test_still_vague_message_asks_again(machine: str) -> None:
    fsm = run(machine, "help me")
    fsm.transition(EventType.MESSAGE_RECEIVED, text="please")
    drive(fsm)
    assert fsm.state == "suspended"


def test_classic_failing_step_replans_once_then_fails_explained(workspace: Path) -> None:
    """Regression (issue 15): a task whose step still fails after the replan ended completed."""
    fsm = start("classic", "read missing.txt and compute 1+1", workspace=str(workspace))
    outcomes = drive(fsm)
    assert fsm.state == "failed"
    assert outcomes[-1][0] == "reflect" and outcomes[-1][1].event_type == EventType.TASK_FAILED
    assert outcomes[-1][1].payload["exit_reason"] == "retry_exhausted"
    assert fsm.context.error.startswith("1 tool step(s) failed: read_file (step 0): no such file: ")
    assert [r.verdict for r in fsm.context.reflections] == ["replan", "complete"]
    reads = [a for a in fsm.context.actions_done if a.tool == "read_file"]
    assert [a.success for a in reads] == [False, False]  # the failed step, tried once more
    assert [a.tool for a in fsm.context.actions_done].count("arithmetic") == 1  # successes are not redone
    answer = fsm.context.final_result
    assert "1+1 = 2" in answer and "Could not read missing.txt (tried 2 times): no such file" in answer
    assert "1 of 2 request(s) failed." in answer
    assert fsm.context.reflections[-1].assessment.startswith("gave up: 1 step(s) still failed after a retry")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("text", "why"), [
    ("sleep 90", "tool 'sleep': bad argument(s) seconds: Input should be less than or equal to 60"),
    ("read /etc/hostname", "/etc/hostname is outside the workspace"),
    ('call shout {"text": "hi"}', "unknown tool 'shout'")])
def test_a_deterministic_refusal_fails_once_saying_why(machine: str, text: str, why: str, tmp_path: Path) -> None:
    """Issue 31: a limit, confinement or an unknown tool is refused again on a retry: tried once, never cut."""
    fsm = start(machine, text, workspace=str(tmp_path))
    outcomes = drive(fsm)
    assert fsm.state == "failed" and outcomes[-1][1].payload["exit_reason"] == "fatal_error"  # not retry_exhausted
    calls = [a for a in fsm.context.actions_done if a.action_type == "tool_call"]
    assert len(calls) == 1 and calls[0].refused and why in (calls[0].error or ""), calls
    assert "tried" not in fsm.context.final_result and why in fsm.context.final_result
    assert all(r.verdict != "replan" for r in fsm.context.reflections)


def test_a_refused_call_planned_again_is_refused_without_calling_the_tool() -> None:
    """A model's planner may plan a refused call again: the act stage answers the refusal, the tool is not run."""
    calls = []
    registry = ToolRegistry()
    refused = ActionResult(step_index=0, tool="shout", params={"text": "hi"}, success=False, refused=True,
                           error="unknown tool 'shout'; known tools: (none)")
    context = TaskContext(input_text="x", actions_done=[refused])
    runner = dataclasses.replace(_processors().step_runner, tools=registry)
    registry.call = lambda *a, **k: calls.append(a)  # type: ignore[method-assign]
    again = runner.run_step(context, PlanStep(index=1, description="again", action_type="tool_call",
                                              action_params={"tool": "shout", "args": {"text": "hi"}}))
    assert (again.success, again.refused, calls) == (False, True, [])
    assert again.error == "unknown tool 'shout'; known tools: (none) (refused before: not tried again)"
    assert "do not repeat it" in result_view(again)["refused"]  # what a model is shown of it


def test_a_failed_sub_task_is_not_retried_by_its_parent() -> None:
    """Issue 31: the child had its own tries; another would be a new tree, multiplied at every level."""
    failed = ActionResult(step_index=0, action_type="sub_task", tool="sub_task", params={"text": "echo x"},
                          success=False, error="sub-task t-2 failed: boom")
    context = TaskContext(input_text="in parallel: echo x; echo y", actions_done=[failed],
                          plan=Plan(goal="g", steps=[PlanStep(index=0, description="s", action_type="sub_task",
                                                              action_params={"text": "echo x"}, completed=True)]))
    assert OfflineReflector().run(context).verdict == "complete"


def test_classic_transient_failure_succeeds_on_the_replan(workspace: Path) -> None:
    """A failure can be transient: the file appears before the retry, and the answer says so."""
    fsm = start("classic", "read later.txt", workspace=str(workspace))
    processors = _processors()
    while fsm.state in STAGE_OF:
        if fsm.state == "planning" and fsm.context.reflections:  # the replan: the file exists now
            (workspace / "later.txt").write_text("here now")
        outcome = run_stage(processors, STAGE_OF[fsm.state], fsm.context, machine="classic")
        fsm.transition(outcome.event_type, **outcome.payload)
    assert fsm.state == "completed"
    assert [r.verdict for r in fsm.context.reflections] == ["replan", "complete"]
    assert fsm.context.final_result == "later.txt:\nhere now (succeeded on attempt 2)"


def test_reason_act_failing_step_is_retried_once_then_fails_explained(workspace: Path) -> None:
    """Regression (issue 15): the respond-only plan after a step failed twice completed the task."""
    fsm = start("reason_act", "read missing.txt", workspace=str(workspace))
    outcomes = drive(fsm)
    assert fsm.state == "failed"
    assert outcomes[-1][0] == "reason" and outcomes[-1][1].payload["exit_reason"] == "retry_exhausted"
    assert [a.success for a in fsm.context.actions_done if a.tool == "read_file"] == [False, False]
    assert fsm.context.final_result.startswith("Could not read missing.txt (tried 2 times): no such file")


def test_a_reasoners_answer_over_a_failed_step_fails_the_task_and_stays_its_result(workspace: Path) -> None:
    """Any reasoner (a model too): an answer right after a failed tool step does not complete the task."""

    class AnswersAtOnce:
        def run(self, context: TaskContext) -> tuple[dict, Plan]:
            if not context.actions_done:
                step = PlanStep(index=0, description="read", action_type="tool_call",
                                action_params={"tool": "read_file", "args": {"path": "missing.txt"}})
                return {"approach": "read"}, Plan(goal="g", steps=[step])
            answer = PlanStep(index=0, description="respond", action_type="respond",
                              action_params={"text": "There is no missing.txt."})
            return {"approach": "answer"}, Plan(goal="g", steps=[answer])

    processors = dataclasses.replace(_processors(), reasoner=AnswersAtOnce())
    fsm = start("reason_act", "read missing.txt", workspace=str(workspace))
    outcomes = drive(fsm, processors)
    assert fsm.state == "failed" and outcomes[-1][1].payload["exit_reason"] == "retry_exhausted"
    assert fsm.context.final_result == "There is no missing.txt."
    assert fsm.context.error.startswith("1 tool step(s) failed: read_file (step 0): no such file")


@pytest.mark.parametrize("text", ["what is 2 + 3 * 4?", "list . and sleep 0.01"])
def test_reason_act_terminates_with_a_respond_only_plan(text: str) -> None:
    """Seed 001: a finished plan with tool calls goes back to reasoning; the next plan is respond only."""
    fsm = start("reason_act", text)
    outcomes = drive(fsm)
    assert fsm.state == "completed"
    assert [step.action_type for step in fsm.context.plan.steps] == ["respond"]
    assert outcomes[-1][1].event_type == EventType.STEP_COMPLETED
    plans = [o.payload["plan"] for stage, o in outcomes if stage == "reason"]
    assert all(any(s["action_type"] == "tool_call" for s in plan["steps"]) for plan in plans[:-1])


@pytest.mark.parametrize("machine", MACHINES)
def test_same_input_same_outcomes(machine: str, workspace: Path) -> None:
    """Determinism: with a fixed step timer, two runs give identical outcomes and histories."""
    def once() -> tuple[list, list]:
        fsm = start(machine, "count lines in notes.txt, read missing.txt and what is (10-4)/3",
                    workspace=str(workspace))
        outcomes = drive(fsm)
        return [(s, o.event_type, o.payload) for s, o in outcomes], [h.model_dump() for h in fsm.history]
    assert once() == once()


@pytest.mark.parametrize("machine", MACHINES)
def test_payloads_are_plain_data(machine: str, workspace: Path) -> None:
    """Every payload survives JSON and msgpack: it crosses processes and is checkpointed."""
    fsm = start(machine, "what is 2**100 and list . and read notes.txt", workspace=str(workspace))
    for _, outcome in drive(fsm):
        assert json.loads(json.dumps(outcome.payload)) == outcome.payload
        msgpack.packb(outcome.payload)


# -- the run_stage contract ----------------------------------------------------------------------


def test_pools() -> None:
    assert {pool_for(stage) for stage in LLM_STAGES} == {"llm"}
    assert [pool_for(stage) for stage in TOOL_STAGES] == ["tool"]
    with pytest.raises(ValueError, match="unknown stage"):
        pool_for("dream")


def test_run_stage_refuses_unknown_stage_and_machine() -> None:
    with pytest.raises(ValueError, match="unknown stage"):
        run_stage(_processors(), "dream", TaskContext(), machine="classic")
    with pytest.raises(ValueError, match="unknown cognitive machine"):
        run_stage(_processors(), "think", TaskContext(), machine="lifecycle")


def _context_with(*steps: PlanStep, **fields: object) -> TaskContext:
    return TaskContext(input_text="x", plan=Plan(goal="g", steps=list(steps)), **fields)


def test_a_tool_failure_is_an_outcome_not_an_exception() -> None:
    step = PlanStep(index=0, description="d", action_params={"tool": "arithmetic", "args": {"expression": "1/0"}})
    outcome = run_stage(_processors(), "act", _context_with(step), machine="classic")
    assert outcome.event_type == EventType.TOOL_CALL_FAILED
    assert outcome.payload["result"]["success"] is False
    assert outcome.payload["result"]["error"] == "division by zero"


def test_bad_arguments_and_unknown_tools_fail_the_step() -> None:
    bad = PlanStep(index=0, description="d", action_params={"tool": "sleep", "args": {"seconds": "soon"}})
    unknown = PlanStep(index=1, description="d", action_params={"tool": "teleport", "args": {}})
    context = _context_with(bad, unknown)
    first = run_stage(_processors(), "act", context, machine="reason_act")
    assert first.event_type == EventType.TOOL_CALL_FAILED and "seconds" in first.payload["result"]["error"]
    second = run_stage(_processors(), "act", context, machine="reason_act", step_index=1)
    assert "unknown tool 'teleport'" in second.payload["result"]["error"]


def test_respond_steps_set_the_final_result_and_use_step_completed_on_reason_act() -> None:
    respond = PlanStep(index=0, description="r", action_type="respond")
    for machine, event in (("classic", EventType.TOOL_CALL_COMPLETED), ("reason_act", EventType.STEP_COMPLETED)):
        outcome = run_stage(_processors(), "act", _context_with(respond), machine=machine)
        assert outcome.event_type == event
        assert outcome.payload["final_result"] == "There was nothing to do."


def test_act_without_a_step_is_a_stage_error() -> None:
    with pytest.raises(StageError, match="no plan"):
        run_stage(_processors(), "act", TaskContext(), machine="classic")
    with pytest.raises(StageError, match="no step 5"):
        run_stage(_processors(), "act", _context_with(PlanStep(index=0, description="d")), machine="classic",
                  step_index=5)


def test_a_processor_exception_becomes_a_stage_error() -> None:
    class Broken:
        def run(self, context: TaskContext) -> dict:
            raise RuntimeError("model unavailable")

    base = _processors()
    processors = Processors(base.perceiver, Broken(), base.planner, base.step_runner,  # type: ignore[arg-type]
                            base.reflector, base.reasoner)
    with pytest.raises(StageError) as caught:
        run_stage(processors, "think", TaskContext(input_text="what is 1+1"), machine="classic")
    assert caught.value.stage == "think" and "RuntimeError: model unavailable" in caught.value.message
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.stage, str(copy)) == ("think", str(caught.value))


def test_reflector_replans_only_once() -> None:
    failed = PlanStep(index=0, description="d", completed=True)
    context = _context_with(failed)
    context.actions_done.append(ActionResult(step_index=0, tool="read_file", params={"path": "x"},
                                             success=False, error="no such file: x"))
    assert OfflineReflector().run(context).verdict == "replan"
    context.reflections.append(Reflection(verdict="replan"))
    assert OfflineReflector().run(context).verdict == "complete"


def test_perceiver_reads_the_resume_messages() -> None:
    context = TaskContext(input_text="help me", messages=[{"role": "user", "content": "list ./src"},
                                                          {"role": "assistant", "content": "echo no"}])
    perception = _processors().perceiver.run(context)
    assert [(i["tool"], i["args"], i["source"]) for i in perception["intents"]] == [
        ("list_dir", {"path": "./src"}, "message 1")]


# -- the request grammar -------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("what is 2 + 3 * 4?", [("arithmetic", {"expression": "2 + 3 * 4"})]),
    ("(10-4)/3", [("arithmetic", {"expression": "(10-4)/3"})]),
    ("compute 2 plus 3 times 4", [("arithmetic", {"expression": "2 + 3 * 4"})]),
    ("calculate 2^10", [("arithmetic", {"expression": "2**10"})]),
    ("call me at 555-1234", []),
    ("ls", [("list_dir", {"path": "."})]),
    ("ls -la /tmp", [("list_dir", {"path": "/tmp"})]),
    ("what files are in src?", [("list_dir", {"path": "src"})]),
    ("show the files in ./src", [("list_dir", {"path": "./src"})]),
    ("read README.md", [("read_file", {"path": "README.md"})]),
    ("show me /etc/hostname.", [("read_file", {"path": "/etc/hostname"})]),
    ("cat 'my notes.txt'", [("read_file", {"path": "my notes.txt"})]),
    ("count words in 'hello big world'", [("count", {"text": "hello big world", "units": ["words"]})]),
    ("how many lines are in setup.cfg?", [("count", {"path": "setup.cfg", "units": ["lines"]})]),
    ("count README.md's words", []),
    ("count the number of words and lines in a.txt", [("count", {"path": "a.txt", "units": ["lines", "words"]})]),
    ("count the lines in setup.cfg and compute 6*7",
     [("count", {"path": "setup.cfg", "units": ["lines"]}), ("arithmetic", {"expression": "6*7"})]),
    ("echo hello and goodbye", [("echo", {"text": "hello and goodbye"})]),
    ("echo hi and compute 2+2", [("echo", {"text": "hi"}), ("arithmetic", {"expression": "2+2"})]),
    ('say "read me and weep"', [("echo", {"text": "read me and weep"})]),
    ("I'd say so", []),
    ("sleep 0.5", [("sleep", {"seconds": 0.5})]),
    ("wait 2 seconds", [("sleep", {"seconds": 2.0})]),
    ("wait 500 ms", [("sleep", {"seconds": 0.5})]),
    ("sleep 90", [("sleep", {"seconds": 90.0})]),  # as asked: the tool refuses it past its maximum (issue 31)
    ("help me", []),
    ("do the thing", []),
])
def test_intent_grammar(text: str, expected: list) -> None:
    assert [(i["tool"], i["args"]) for i in perceive_text(text)["intents"]] == expected


def test_entities() -> None:
    entities = perceive_text("read ./src/a.py and say 'hi there' then compute (1 + 2) * 3")["entities"]
    assert entities == {"numbers": [1, 2, 3], "expressions": ["(1 + 2) * 3"], "paths": ["./src/a.py"],
                        "quoted": ["hi there"]}


@pytest.mark.parametrize("text", ["-" * 60000, " " * 60000, "a." * 30000, "say " * 15000, "ls " * 20000,
                                  "echo hi and " * 5000, "(1" * 30000])
def test_perception_is_linear_on_pathological_input(text: str) -> None:
    """Regression: a run of 60 000 '-' once took seconds (a backtracking pattern).  Ten times the input
    must take about ten times the CPU, not a hundred (quadratic): the ratio of the best of three runs
    each, in this process's CPU time, which a loaded machine does not stretch (no wall-clock limit)."""
    import time

    def best(sample: str) -> float:
        times = []
        for _ in range(3):
            started = time.process_time()
            perceive_text(sample)
            times.append(time.process_time() - started)
        return max(min(times), 1e-4)  # (a floor: a tiny sample's time is mostly noise)

    assert best(text) / best(text[: len(text) // 10]) < 40


def test_too_many_intents_are_capped() -> None:
    perception = _processors().perceiver.run(TaskContext(input_text=" ".join(f"compute {n}+1;" for n in range(99))))
    assert len(perception["intents"]) == 50


@pytest.mark.parametrize("machine", MACHINES)
def test_sleep_and_echo_tasks(machine: str) -> None:
    fsm = run(machine, "sleep 0.01 then say hello world")
    assert fsm.state == "completed" and fsm.context.final_result == "Slept 0.01 s.\nhello world"
