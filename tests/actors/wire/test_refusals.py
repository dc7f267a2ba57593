"""A message larger than a frame is refused unsent by Thespian and handed back to its sender as a ``PoisonMessage``
(our serializer's ``FrameTooLarge`` last in its details): whoever waits for it hears why instead of waiting out a
timeout -- a pool's requester when its ``Work`` is refused, a requester or pool when a worker's answer is."""

from __future__ import annotations

from thespian.actors import PoisonMessage

from actors.messages import StageRequest, StageResult, Work, WorkDone
from actors.pool_carrier import refused_work
from actors.wire.frames import refused_why
from actors.worker import StageWorker
from pegasus.pool import inputs as i

REFUSED = ("Traceback (most recent call last):\n  ...\nactors.wire.frames.FrameTooLarge: a Work message is 85974 bytes; "
           "frames are limited to 65536 bytes ([system] max_frame_bytes)")
WHY = "a Work message is 85974 bytes; frames are limited to 65536 bytes ([system] max_frame_bytes)"


def _request() -> StageRequest:
    return StageRequest("t1", 3, "act", "classic", None, 1)


def test_a_refusal_is_read_from_the_poisons_details_and_nothing_else_is_one() -> None:
    assert refused_why(PoisonMessage(object(), REFUSED)) == WHY
    assert refused_why(PoisonMessage(object(), "Traceback ...\nValueError: bad")) is None
    assert refused_why(PoisonMessage(object(), None)) is None


def test_a_refused_work_ends_its_job_failed_saying_why() -> None:
    finished = refused_work(PoisonMessage(Work(7, _request(), "requester", 30.0), REFUSED))
    assert isinstance(finished, i.Finished) and finished.job == 7
    result = finished.result
    assert (result.task_id, result.token, result.stage, result.ok, result.error_kind) == ("t1", 3, "act", False,
                                                                                           "too_large")
    assert WHY in result.error
    assert refused_work(PoisonMessage(Work(7, _request(), "requester", 30.0), "ValueError: other")) is None
    assert refused_work(PoisonMessage(WorkDone(7), REFUSED)) is None


class _Worker:
    def __init__(self) -> None:
        self.sent: list[tuple[object, object]] = []

    def send(self, to: object, message: object) -> None:
        self.sent.append((to, message))


def test_a_workers_refused_answer_goes_again_as_a_failed_result_to_whoever_waits_for_it() -> None:
    worker, answer = _Worker(), StageResult("t1", 3, "act", ok=True, payload={"output": "y" * 10}, worker={"pid": 9})
    StageWorker.receiveMsg_PoisonMessage(worker, PoisonMessage(answer, REFUSED), "requester")  # type: ignore[arg-type]
    StageWorker.receiveMsg_PoisonMessage(worker, PoisonMessage(WorkDone(7, answer, {"pid": 9}), REFUSED), "pool")  # type: ignore[arg-type]
    StageWorker.receiveMsg_PoisonMessage(worker, PoisonMessage(WorkDone(8), REFUSED), "pool")  # type: ignore[arg-type]
    StageWorker.receiveMsg_PoisonMessage(worker, PoisonMessage(answer, "ValueError: other"), "pool")  # type: ignore[arg-type]
    [(to, direct), (pool, done)] = worker.sent
    assert to == "requester" and not direct.ok and direct.error_kind == "too_large" and WHY in direct.error
    assert direct.payload == {} and direct.worker == {"pid": 9} and (direct.task_id, direct.token) == ("t1", 3)
    assert pool == "pool" and isinstance(done, WorkDone) and done.job == 7 and not done.result.ok
    assert done.worker == {"pid": 9}
