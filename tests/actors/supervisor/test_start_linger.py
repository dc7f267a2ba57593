"""A group of reports whose sends are only the next runs' starts lingers like one that sent nothing, so the ends
of several runs share one commit and their successors one message (actors/supervisor/outbox.py, issue 33)."""

from __future__ import annotations

from actors import messages as m
from actors.supervisor.outbox import coalesced, urgent
from pegasus.store.drain import DrainBatch, Linger, Settle


def _start(task_id: str) -> m.StartTask:
    return m.StartTask(None, 1, None, None, task_id=task_id)


def test_starts_alone_are_not_urgent_and_anything_else_is() -> None:
    actor, client = object(), object()
    assert not urgent([])
    assert not urgent([(actor, _start("t1")), (actor, _start("t2"))])
    assert urgent([(actor, _start("t1")), (client, m.Reply("r1", True))])
    assert urgent([(actor, m.DropTask("t1", 1))])


def test_six_ends_each_starting_the_next_run_share_one_commit_and_one_message() -> None:
    """Six reports, each the end of a run whose successor starts, read one at a time (stages that wait): the
    supervisor's carrier with the real policy.  Before: six commits and six start messages."""
    actor = object()
    batch, held, commits, sent = DrainBatch(), [], 0, []
    for n in range(6):
        batch.before(batched=True, can_hold=True)
        held.append((actor, _start(f"t{n}")))  # what handling the end sent: the next run's start
        for command in batch.after(next_batched=False, sends_held=urgent(held), linger_s=0.02):
            if isinstance(command, Settle):
                commits += 1
                sent, held = sent + coalesced(held), []
            assert isinstance(command, (Linger, Settle))
    for command in batch.before(batched=False, can_hold=True, lingered=True):  # the timer
        assert isinstance(command, Settle)
        commits += 1
        sent, held = sent + coalesced(held), []
    assert commits == 1
    assert [type(message).__name__ for _, message in sent] == ["StartTasks"]
    assert [start.task_id for start in sent[0][1].starts] == [f"t{n}" for n in range(6)]
