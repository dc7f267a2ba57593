"""A client's notices by task (actors/client/notices.py): each follow reads its own task's, and
``notices()`` takes only those of the tasks no follow reads."""

from __future__ import annotations

from actors import messages as m
from actors.client.notices import Notices


def _notice(task_id: str, to_state: str = "running") -> m.TransitionNotice:
    return m.TransitionNotice(task_id, "lifecycle", "queued", to_state, "TASK_STARTED", "2026-01-01T00:00:00+00:00")


def test_a_follow_reads_its_task_and_the_rest_are_taken_in_order() -> None:
    notices = Notices()
    notices.keep(_notice("t1"))  # before its follow starts (submit(follow=True)): kept for it
    mine = notices.follow("t1")
    for notice in (_notice("t2"), _notice("t1", "done"), m.TextDelta("t2", 1, "think", 1, "hi"), _notice("t3")):
        notices.keep(notice)
    assert [n.to_state for n in mine] == ["running", "done"] and notices.queued("t1") == 2
    assert notices.unfollowed_waiting()
    taken = notices.take_unfollowed()
    assert [n.task_id for n in taken] == ["t2", "t2", "t3"] and isinstance(taken[1], m.TextDelta)
    assert not notices.unfollowed_waiting() and notices.queued("t1") == 2  # the followed task's stay


def test_two_follows_of_one_task_share_its_queue_until_the_last_ends() -> None:
    notices = Notices()
    first, second = notices.follow("t1"), notices.follow("t1")
    assert first is second
    notices.keep(_notice("t1"))
    notices.discard("t1")  # followed: not discarded
    notices.unfollow("t1")
    assert notices.queued("t1") == 1
    notices.unfollow("t1")
    assert notices.queued("t1") == 0 and "t1" not in notices.following
