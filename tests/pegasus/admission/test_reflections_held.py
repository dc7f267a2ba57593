"""Post-task reflections a task actor handed out (issue 33), as the supervisor's core decides them: the
answer is taken from that actor only, once; the attempt count and its limit hold; one lost with its task
actor is the supervisor's to hand out, first in line, under its own limit."""

from __future__ import annotations

from pegasus.admission.reflections import (
    MAX_ATTEMPTS, Answered, AnsweredBy, Count, Dispatch, GiveUp, HandedOut, HeldBy, HolderLost, Keep, PostReflections,
    TakenBack, Want,
)

KEPT = {"post_reflection": {"facts": [], "assessment": "ok"}}


def test_a_held_reflection_is_answered_by_its_task_actor_only_and_once() -> None:
    post = PostReflections(limit=1)
    assert post.step(HeldBy("t1", "actor-1", 1)) == []
    assert post.step(AnsweredBy("t1", "actor-2", True, KEPT, None)) == []  # not the one that holds it
    assert post.step(Answered("t1", 1, True, KEPT, None)) == []  # nor an answer to a hand-out of the supervisor's
    [kept] = post.step(AnsweredBy("t1", "actor-1", True, KEPT, None))
    assert isinstance(kept, Keep) and kept.reflection.assessment == "ok"
    assert post.step(AnsweredBy("t1", "actor-1", True, KEPT, None)) == []  # twice: once written
    assert post.view() == {"out": 0, "waiting": 0, "held": 0, "handed_out": 0, "handed_out_by_task_actors": 1}


def test_a_held_reflection_takes_no_place_of_the_supervisor_s_and_is_not_queued_again() -> None:
    post = PostReflections(limit=1)
    post.step(HeldBy("t1", "actor-1", 1))
    assert post.step(Want("t1")) == []  # a restore's pending one that a task actor holds: not handed out twice
    assert post.step(Want("t2")) == [Count("t2")]  # the supervisor's own limit is its own


def test_a_lost_worker_or_a_failure_is_decided_as_for_the_supervisor_s_own() -> None:
    post = PostReflections(limit=1)
    post.step(HeldBy("t1", "actor-1", 1))
    post.step(HeldBy("t2", "actor-1", 1))
    # a lost worker: handed out by the supervisor now, counted again
    assert post.step(AnsweredBy("t1", "actor-1", False, {}, "died", "worker_died")) == [Count("t1")]
    [out] = post.step(HandedOut("t1", 2))
    assert isinstance(out, Dispatch)
    [failed] = post.step(AnsweredBy("t2", "actor-1", False, {}, "the model said 500", "exception"))
    assert isinstance(failed, GiveUp) and "the model said 500" in failed.error
    [given_up] = post.step(HeldBy("t3", "actor-1", MAX_ATTEMPTS + 1))
    assert isinstance(given_up, GiveUp)  # never tried forever


def test_the_reflections_of_a_task_actor_that_died_go_first_in_line_and_its_late_answer_is_dropped() -> None:
    post = PostReflections(limit=1)
    assert post.step(Want("t0")) == [Count("t0")]
    [out] = post.step(HandedOut("t0", 1))
    assert isinstance(out, Dispatch)
    post.step(Want("w1"))  # waits behind t0
    for task_id in ("t1", "t2"):
        post.step(HeldBy(task_id, "actor-1", 1))
    post.step(HeldBy("t3", "actor-2", 1))
    assert post.step(HolderLost("actor-1")) == [TakenBack(("t1", "t2"))]  # t0 still out: none goes yet
    assert list(post.waiting) == ["t1", "t2", "w1"] and set(post.held) == {"t3"}
    assert post.step(AnsweredBy("t1", "actor-1", True, KEPT, None)) == []  # (a dead actor's answer: never kept)
    kept, going = post.step(Answered("t0", out.token, True, KEPT, None))
    assert isinstance(kept, Keep) and going == Count("t1")  # under the supervisor's limit, in order
    assert post.step(HolderLost("actor-1")) == []
