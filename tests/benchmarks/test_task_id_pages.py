"""New task ids are time-ordered (``pegasus.store.task_ids.TaskIds``): a commit of many tasks' rows dirties a
few pages of each index led by the task's id, not one random page a task.  Before (uuid4 ids), 32 classic
tasks in flight, 8 reports a commit, 300 tasks stored: ~28 WAL pages a task; now ~14."""

from __future__ import annotations

from hypothesis import given, strategies as st

from benchmarks.checkpoint import in_flight_pages
from pegasus.admission.core import Admission
from pegasus.config import Settings
from pegasus.store.task_ids import TICKS, TaskIds, full_task_id


def test_the_admissions_new_ids_cost_a_commit_few_index_pages() -> None:
    admission = Admission(Settings())
    assert in_flight_pages(admission.id_factory, 96, in_flight=32, per_commit=8, stored=300) <= 18


def test_an_admissions_task_ids_sort_in_the_order_they_were_made() -> None:
    admission = Admission(Settings())
    made = [admission.submit(f"task {n}", "classic", 5, {}, "cli")[0].task_id for n in range(50)]
    assert made == sorted(made) and len({task_id[:8] for task_id in made}) == 50


@given(st.lists(st.integers(min_value=-5_000, max_value=10_000), min_size=1, max_size=60),
       st.integers(min_value=0, max_value=TICKS - 1))
def test_ids_rise_and_their_shown_prefixes_differ_whatever_the_clock_does(steps: list[int], start: int) -> None:
    """The clock may stand still, step back or wrap: each id's first 8 digits are the last one's plus at least
    one (mod 2**32), so no two shown prefixes of one supervisor's ids are equal (below 2**32 ids)."""
    now = [start * 1_000_000]
    clock = iter(steps)

    def clock_ns() -> int:
        now[0] += next(clock) * 1_000_000
        return now[0]

    ids = TaskIds(clock_ns, lambda n: bytes(n))
    made = [ids() for _ in steps]
    ticks = [int(task_id[:8], 16) for task_id in made]
    assert all(len(task_id) == 32 and int(task_id, 16) >= 0 for task_id in made)
    assert all(0 < (b - a) % TICKS < TICKS // 2 for a, b in zip(ticks, ticks[1:]))
    assert len(set(ticks)) == len(ticks)


def test_an_id_made_before_a_uuid4_is_still_found_whole_and_by_prefix() -> None:
    old = "9f86d081884c7d659a2feaa0c55ad015"
    rows = [(old,)]
    assert full_task_id(lambda sql, params: rows, old) == old
    assert full_task_id(lambda sql, params: rows, old[:6]) == old
