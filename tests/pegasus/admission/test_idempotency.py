"""Idempotency keys in Admission: a key answers the task it created, in the store, for good."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pegasus.admission import Admission
from pegasus.config import Settings
from pegasus.idempotency import IdempotencyConflict, check_batch, submit_claim
from pegasus.store import Store


def admission_on(path: Path) -> Admission:
    counter = itertools.count(1)
    return Admission(Settings(), id_factory=lambda: f"t{next(counter)}", store=Store(path / "p.db"))


def test_a_used_key_answers_its_task_with_no_effects(tmp_path: Path) -> None:
    admission = admission_on(tmp_path)
    first, effects = admission.submit("echo a", "classic", 5, {"w": "/x"}, "cli", key="k1")
    assert effects and admission.store.claimed("submit", "k1")["task_id"] == first.task_id
    again, effects = admission.submit("echo a", "classic", 5, {"w": "/x"}, "python", key="k1")
    assert again is first and effects == []  # the source is not part of the request's content
    other, _ = admission.submit("echo a", "classic", 5, {"w": "/x"}, "cli", key="k2")
    assert other.task_id != first.task_id
    assert len(admission.records) == 2


@pytest.mark.parametrize("change", [{"text": "echo b"}, {"machine": "reason_act"}, {"priority": 1},
                                    {"metadata": {"w": "/y"}}])
def test_a_used_key_with_other_content_is_a_conflict_naming_the_task(tmp_path: Path, change) -> None:
    admission = admission_on(tmp_path)
    request = {"text": "echo a", "machine": "classic", "priority": 5, "metadata": {"w": "/x"}}
    first, _ = admission.submit(**request, source="cli", key="k1")
    with pytest.raises(IdempotencyConflict, match=f"'k1' was used for task {first.task_id} with other content") as caught:
        admission.submit(**{**request, **change}, source="cli", key="k1")
    assert (caught.value.key, caught.value.task_id) == ("k1", first.task_id)
    assert len(admission.records) == 1


def test_a_key_outlives_the_admission_and_the_task(tmp_path: Path) -> None:
    first = admission_on(tmp_path)
    record, _ = first.submit("echo a", "classic", 5, {}, "cli", key="k1")
    first.cancel(record.task_id, "no longer wanted")  # a finished task leaves memory
    assert record.task_id not in first.records
    restarted = admission_on(tmp_path)
    again, effects = restarted.submit("echo a", "classic", 5, {}, "cli", key="k1")
    assert (again.task_id, again.state, effects) == (record.task_id, "canceled", [])


def test_without_a_key_every_submit_is_new(tmp_path: Path) -> None:
    admission = admission_on(tmp_path)
    a, _ = admission.submit("echo a", "classic", 5, {}, "cli")
    b, _ = admission.submit("echo a", "classic", 5, {}, "cli")
    assert a.task_id != b.task_id and admission.store.claimed("submit", "") is None


def test_one_request_repeats_a_key_only_with_the_same_content() -> None:
    same = submit_claim("k", "echo a", "classic", 5, {})
    check_batch([same, None, submit_claim("k", "echo a", "classic", 5, {})])
    with pytest.raises(IdempotencyConflict, match="task 3: idempotency key 'k' is given twice"):
        check_batch([same, None, submit_claim("k", "echo b", "classic", 5, {})])


def test_a_fingerprint_ignores_key_order_of_the_metadata() -> None:
    assert submit_claim("k", "t", "classic", 5, {"a": 1, "b": 2}) == submit_claim("k", "t", "classic", 5, {"b": 2, "a": 1})
