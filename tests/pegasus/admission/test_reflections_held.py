"""Post-task reflections a task actor handed out (issue 33), as the supervisor's core decides them: the
answer is taken from that actor only, once; the attempt count and its limit hold; one lost with its task
actor is the supervisor's to hand out, first in line, under its own limit."""

from __future__ import annotations

from pegasus.admission.reflections import MAX_ATTEMPTS, Again, Dispatch, GiveUp, Held, Keep, PostReflections

KEPT = {"post_reflection": {"facts": [], "assessment": "ok"}}


def test_a_held_reflection_is_answered_by_its_task_actor_only_and_once() -> None:
    post = PostReflections(limit=1)
    assert post.held_by("t1", "actor-1", 1) == Held("t1")
    assert post.answered_by("t1", "actor-2", True, KEPT, None) is None  # not the one that holds it
    assert post.answered("t1", 1, True, KEPT, None) is None  # nor an answer to a hand-out of the supervisor's
    kept = post.answered_by("t1", "actor-1", True, KEPT, None)
    assert isinstance(kept, Keep) and kept.reflection.assessment == "ok"
    assert post.answered_by("t1", "actor-1", True, KEPT, None) is None  # twice: once written
    assert post.view() == {"out": 0, "waiting": 0, "held": 0, "handed_out": 0, "handed_out_by_task_actors": 1}


def test_a_held_reflection_takes_no_place_of_the_supervisor_s_and_is_not_queued_again() -> None:
    post = PostReflections(limit=1)
    post.held_by("t1", "actor-1", 1)
    assert post.want("t1") == []  # a restore's pending one that a task actor holds: not handed out twice
    assert post.want("t2") == ["t2"]  # the supervisor's own limit is its own


def test_a_lost_worker_or_a_failure_is_decided_as_for_the_supervisor_s_own() -> None:
    post = PostReflections(limit=1)
    post.held_by("t1", "actor-1", 1)
    post.held_by("t2", "actor-1", 1)
    assert post.answered_by("t1", "actor-1", False, {}, "died", "worker_died") == Again("t1")
    post.again("t1")
    assert post.release() == ["t1"]  # handed out by the supervisor now, counted again
    assert isinstance(post.handed_out("t1", 2), Dispatch)
    failed = post.answered_by("t2", "actor-1", False, {}, "the model said 500", "exception")
    assert isinstance(failed, GiveUp) and "the model said 500" in failed.error
    assert isinstance(post.held_by("t3", "actor-1", MAX_ATTEMPTS + 1), GiveUp)  # never tried forever


def test_the_reflections_of_a_task_actor_that_died_go_first_in_line_and_its_late_answer_is_dropped() -> None:
    post = PostReflections(limit=1)
    assert post.want("t0") == ["t0"]
    out = post.handed_out("t0", 1)
    assert isinstance(out, Dispatch)
    post.want("w1")  # waits behind t0
    for task_id in ("t1", "t2"):
        post.held_by(task_id, "actor-1", 1)
    post.held_by("t3", "actor-2", 1)
    assert post.holder_lost("actor-1") == ["t1", "t2"]
    assert list(post.waiting) == ["t1", "t2", "w1"] and set(post.held) == {"t3"}
    assert post.answered_by("t1", "actor-1", True, KEPT, None) is None  # (a dead actor's answer: never kept)
    assert isinstance(post.answered("t0", out.token, True, KEPT, None), Keep)
    assert post.release() == ["t1"]  # under the supervisor's limit, in order
    assert post.holder_lost("actor-1") == []
