"""A group of reports whose sends are only the next runs' starts lingers like one that sent nothing, so the ends
of several runs share one commit and their successors one message (actors/supervisor/outbox.py, issue 33)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from thespian.actors import PoisonMessage, WakeupMessage

from actors import messages as m
from actors.supervisor import Supervisor, runs
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
    """Six reports, each the end of a run whose successor starts, read one at a time (stages that wait), through
    the policy as the carrier calls it.  Before (outbox.urgent not there): six commits and six start messages."""
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


class _Store:
    def __init__(self) -> None:
        self.commits: list[bool] = []

    def hold(self) -> None:
        pass

    def release(self, commit: bool) -> None:
        self.commits.append(commit)


def _carrier(monkeypatch: pytest.MonkeyPatch, sends: list) -> tuple[Supervisor, list, list, _Store]:
    """The supervisor's carrier (not started in Thespian): its handling of a TaskReports sends ``sends``."""
    supervisor, woken, out, store = Supervisor.__new__(Supervisor), [], [], _Store()
    supervisor.batch, supervisor.held = DrainBatch(), None
    supervisor.ctx = SimpleNamespace(exiting=False, store=store, admission=object(), log=None,
                                     settings=SimpleNamespace(store=SimpleNamespace(commit_linger_ms=20)),
                                     task_actors=SimpleNamespace(reports={"commits": 0}))
    monkeypatch.setattr(supervisor, "_handle", lambda ctx, message, sender: [supervisor._send(*s) for s in sends])
    monkeypatch.setattr(supervisor, "_next_batched", lambda: False)
    monkeypatch.setattr(supervisor, "_wake", lambda seconds, payload: woken.append(payload))
    monkeypatch.setattr(supervisor, "send", lambda address, message: out.append(message))
    return supervisor, woken, out, store


def test_the_carrier_lingers_on_a_report_that_sent_only_starts_and_commits_at_once_on_anything_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor's own receiveMessage: a report whose sends are only StartTasks lingers (its timer armed,
    nothing committed or sent); a Reply among them commits and sends at once.  Before (``bool(held)``): the
    first committed at once too."""
    actor, client = object(), object()
    supervisor, woken, out, store = _carrier(monkeypatch, [(actor, _start("t1"))])
    supervisor.receiveMessage(m.TaskReports(()), actor)
    assert [type(p) for p in woken] == [m.CommitDue] and out == [] and store.commits == []
    supervisor, woken, out, store = _carrier(monkeypatch, [(actor, _start("t1")), (client, m.Reply("r", True))])
    supervisor.receiveMessage(m.TaskReports(()), actor)
    assert woken == [] and store.commits == [True] and [type(x) for x in out] == [m.StartTask, m.Reply]


def test_a_batch_its_task_actor_held_for_time_commits_and_starts_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``TaskReports`` the task actor held for time (``waited``: many runs wait, it is a batch already) sending
    only starts: committed and sent at once, no timer (a second wake-up) armed.  Before, it lingered as any."""
    actor = object()
    supervisor, woken, out, store = _carrier(monkeypatch, [(actor, _start("t1"))])
    supervisor.receiveMessage(m.TaskReports((), 0.0, True), actor)
    assert woken == [] and store.commits == [True] and [type(x) for x in out] == [m.StartTask]



def test_starts_refused_together_as_larger_than_a_frame_go_again_one_by_one_through_the_carrier(monkeypatch) -> None:
    """Thespian refuses a message larger than ``[system] max_frame_bytes`` unsent and hands it back as a
    ``PoisonMessage``: a ``StartTasks`` of many runs' snapshots can outgrow a frame each start fits.  Each start
    still its actor's goes again alone, as a ``StartTasks`` of one (a ``StartTask`` would be coalesced again)."""
    supervisor, out = Supervisor.__new__(Supervisor), []
    supervisor.batch, supervisor.held = DrainBatch(), None
    actor, dropped = object(), "t2"  # t2 was canceled meanwhile: its actor holds no run of it
    supervisor.ctx = SimpleNamespace(
        exiting=False, store=_Store(), admission=object(), log=None,
        settings=SimpleNamespace(store=SimpleNamespace(commit_linger_ms=20)), send=supervisor._send,
        task_actors=SimpleNamespace(reports={"commits": 0},
                                    address_of=lambda task_id, run: None if task_id == dropped else actor))
    monkeypatch.setattr(supervisor, "_next_batched", lambda: False)
    monkeypatch.setattr(supervisor, "_wake", lambda seconds, payload: None)
    monkeypatch.setattr(supervisor, "send", lambda address, message: out.append((address, message)))
    starts = m.StartTasks((_start("t1"), _start("t2"), _start("t3")))
    refused = "Traceback ...\nactors.wire.frames.FrameTooLarge: a StartTasks message is 99999 bytes; frames are ..."
    supervisor.receiveMessage(PoisonMessage(starts, refused), actor)
    if not out:  # starts alone linger (not urgent): the commit's timer sends them
        supervisor.receiveMessage(WakeupMessage(0.02, m.CommitDue()), actor)
    assert [(address, [start.task_id for start in message.starts]) for address, message in out] == \
        [(actor, ["t1"]), (actor, ["t3"])]
    out.clear()
    supervisor.receiveMessage(PoisonMessage(starts, "Traceback ...\nValueError: not ours"), actor)
    supervisor.receiveMessage(WakeupMessage(0.02, m.CommitDue()), actor)
    assert out == []



def test_an_answer_refused_as_larger_than_a_frame_is_an_error_answer_saying_so() -> None:
    """A ``list`` of forty tasks under the smallest frame: the asker waited out its timeout and was told the
    system was not running."""
    sent: list[tuple[object, object]] = []
    ctx = SimpleNamespace(send=lambda address, message: sent.append((address, message)))
    client = object()
    refused = "Traceback ...\nactors.wire.frames.FrameTooLarge: a Reply message is 99999 bytes; frames are limited ..."
    runs.unsent(ctx, PoisonMessage(m.Reply("r1", True, data=["x" * 10]), refused), client)
    [(to, reply)] = sent
    assert to is client and isinstance(reply, m.Reply) and reply.request_id == "r1" and not reply.ok
    assert reply.error_type == "AnswerTooLarge" and "a Reply message is 99999 bytes" in reply.error
