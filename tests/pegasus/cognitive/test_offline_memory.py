"""The offline processors and memory (issue 19): "remember ..." plans a memory.write, a recalled fact answers a
question naming its path, a repeated request names its earlier episode, and the post-task reflector is deterministic."""

from __future__ import annotations

from pegasus.admission.reflections import (
    MAX_ATTEMPTS, Answered, Count, Dispatch, GiveUp, HandedOut, Keep, PostReflections, Want,
)
from pegasus.cognitive.remember import answering_fact, remembered, slug
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.task.models import ActionResult, Fact, Memory, Plan, Recall, TaskContext

DEPLOY_KEY = Memory(id="fact:deploy-key@1", kind="fact", title="deploy-key", text="The deploy key is in the vault.")


def test_remember_statements_become_facts_with_a_path_from_their_subject() -> None:
    assert remembered("remember that the deploy key is in the vault") == [
        Fact(path="deploy-key", content="The deploy key is in the vault.")]
    assert remembered("Remember: backups run at 3am. Then echo hi") == [
        Fact(path="backups", content="Backups run at 3am.")]
    assert remembered("please remember the staging host is db2.internal; list .") == [
        Fact(path="staging-host", content="The staging host is db2.internal.")]
    assert remembered("what do you remember?") == [] or remembered("what do you remember?")[0].path
    assert slug("  The !! ") == "note" and len(slug("word " * 40)) <= 60


def test_a_remember_request_plans_a_memory_write_then_respond() -> None:
    processors = offline_processors()
    context = TaskContext(input_text="remember that the deploy key is in the vault")
    context.perception = processors.perceiver.run(context)
    plan = processors.planner.run(context)
    assert [(s.action_type, s.action_params.get("tool"), s.action_params.get("args")) for s in plan.steps] == [
        ("tool_call", "memory.write", {"path": "deploy-key", "content": "The deploy key is in the vault."}),
        ("respond", None, None)]


def answer(context: TaskContext, machine: str = "reason_act") -> str:
    processors = offline_processors()
    context.perception = processors.perceiver.run(context)
    outcome = run_stage(processors, "reason", context, machine=machine)
    context.reasoning, context.plan = outcome.payload["reasoning"], Plan.model_validate(outcome.payload["plan"])
    while (step := context.plan.current_step) is not None:  # each step's result applied, as the machine does
        payload = run_stage(processors, "act", context, machine=machine).payload
        context.actions_done.append(ActionResult.model_validate(payload["result"]))
        context.plan.mark_done(step.index)
    return str(payload["final_result"])


def test_a_question_a_recalled_fact_answers_is_answered_from_memory_naming_its_path() -> None:
    context = TaskContext(input_text="where is the deploy key?", recall=Recall(memories=[DEPLOY_KEY]))
    assert answer(context) == "From memory (deploy-key): The deploy key is in the vault."


def test_a_question_no_recalled_fact_answers_still_asks_for_more() -> None:
    assert answering_fact("where is the door key?", Recall(memories=[DEPLOY_KEY])) is None
    assert answering_fact("the deploy key", Recall(memories=[DEPLOY_KEY])) is None  # not a question
    outcome = run_stage(offline_processors(), "reason", TaskContext(input_text="where is the door key?",
                                                                     recall=Recall(memories=[DEPLOY_KEY])),
                        machine="reason_act")
    assert outcome.event_type == "NEED_MORE_INFO"


def test_a_repeated_request_names_the_earlier_episode_in_its_reasoning_never_in_its_answer() -> None:
    """Issue 31: the answer is only the answer (the earlier episode, appended to it, nested at every run)."""
    earlier = Memory(id="episode:7", kind="episode", title="echo hello", text="hello\nLesson: ")
    context = TaskContext(input_text="echo hello", recall=Recall(memories=[earlier]))
    assert answer(context) == "hello"
    assert context.reasoning["done_before"] == {"id": "episode:7", "title": "echo hello", "text": "hello"}
    for machine, stage in (("classic", "think"), ("reason_act", "reason")):
        fresh = TaskContext(input_text="echo hello", recall=Recall(memories=[earlier]))
        outcome = run_stage(offline_processors(), stage, fresh, machine=machine)
        assert outcome.payload["reasoning"]["done_before"]["id"] == "episode:7"


def test_the_offline_post_reflector_keeps_an_episode_and_the_remembered_facts() -> None:
    context = TaskContext(input_text="remember that the deploy key is in the vault",
                          messages=[{"role": "user", "content": "remember: the vault is in Paris"}],
                          final_result="Remembered (deploy-key): The deploy key is in the vault.")
    outcome = run_stage(offline_processors(), "post_reflect", context, machine="classic")
    reflection = outcome.payload["post_reflection"]
    assert outcome.event_type == "REFLECTION_COMPLETE"
    assert reflection["facts"] == [{"path": "deploy-key", "content": "The deploy key is in the vault."},
                                   {"path": "vault", "content": "The vault is in Paris."}]
    assert reflection["episode"]["title"] == "remember that the deploy key is in the vault"
    assert reflection["episode"]["summary"] == "Remembered (deploy-key): The deploy key is in the vault."
    assert outcome == run_stage(offline_processors(), "post_reflect", context, machine="classic")  # deterministic


def test_at_most_limit_reflections_are_out_and_the_others_wait_in_order() -> None:
    """Each one out counts against the llm pool's queue_limit: a burst of done tasks must not fill it."""
    post = PostReflections(limit=2)
    wanted = [c for t in ("t1", "t2", "t3", "t1") for c in post.step(Want(t))]
    assert wanted == [Count("t1"), Count("t2")]  # counted in the store first, then handed out
    [one], [two] = post.step(HandedOut("t1", 1)), post.step(HandedOut("t2", 1))
    assert isinstance(one, Dispatch) and isinstance(two, Dispatch) and list(post.waiting) == ["t3"]
    kept, *going = post.step(Answered("t1", one.token, True, {"post_reflection": {}}, None))
    assert isinstance(kept, Keep) and going == [Count("t3")]  # one answered: the next goes


def test_reflections_are_handed_out_at_most_max_attempts_times_and_late_answers_are_dropped() -> None:
    post = PostReflections()
    post.step(Want("t1"))
    [first] = post.step(HandedOut("t1", 1))
    assert isinstance(first, Dispatch)
    assert post.step(Answered("t1", first.token, False, {}, "died", "worker_died")) == [Count("t1")]  # again
    [second] = post.step(HandedOut("t1", 2))
    assert isinstance(second, Dispatch)
    assert post.step(Answered("t1", first.token, True, {}, None)) == []  # the earlier hand-out's: stale
    [kept] = post.step(Answered("t1", second.token, True, {"post_reflection": {"facts": [], "assessment": "ok"}},
                                None))
    assert isinstance(kept, Keep) and kept.reflection.assessment == "ok"
    post.step(Want("t2"))
    post.step(Want("t3"))
    given_up, going = post.step(HandedOut("t2", MAX_ATTEMPTS + 1))  # never tried forever
    assert isinstance(given_up, GiveUp) and going == Count("t3")  # one given up lets the next go


def test_a_failed_or_malformed_reflection_gives_up_with_the_reason() -> None:
    post = PostReflections(limit=2)
    post.step(Want("t1"))
    post.step(Want("t2"))
    [one], [two] = post.step(HandedOut("t1", 1)), post.step(HandedOut("t2", 1))
    assert isinstance(one, Dispatch) and isinstance(two, Dispatch)
    [failed] = post.step(Answered("t1", one.token, False, {}, "the model said 500", "exception"))
    assert isinstance(failed, GiveUp) and "the model said 500" in failed.error
    [bad] = post.step(Answered("t2", two.token, True, {"post_reflection": {"facts": "nope"}}, None))
    assert isinstance(bad, GiveUp) and "not a PostTaskReflection" in bad.error


def test_a_lost_reflection_goes_first_in_line_and_a_task_waits_once() -> None:
    post = PostReflections(limit=1)
    assert post.step(Want("t1")) == [Count("t1")]
    [out] = post.step(HandedOut("t1", 1))
    assert isinstance(out, Dispatch)
    assert [c for t in ("t2", "t3", "t2") for c in post.step(Want(t))] == [] and list(post.waiting) == ["t2", "t3"]
    assert post.step(Answered("t1", out.token, False, {}, "died", "worker_died")) == [Count("t1")]  # first in line
    assert list(post.waiting) == ["t2", "t3"]
    assert post.step(Want("t1")) == []  # out again: not queued behind itself


def test_the_reflections_core_never_raises() -> None:
    post = PostReflections()
    assert post.step(Answered("t1", 0, True, None, None)) == []  # type: ignore[arg-type]  # nothing decided
    assert post.step(object()) == []  # type: ignore[arg-type]
