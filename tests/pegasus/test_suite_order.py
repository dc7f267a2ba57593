"""The suite's longest tests start first, each on a worker of its own (tests/support/ordering.py):
checked against xdist's own worksteal scheduler, handing a collection out to four fake workers."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from tests.support.ordering import first_runs, lead_order


def first_tests(collection: list[str], workers: int) -> list[str]:
    """The test each worker runs first when xdist's WorkStealingScheduling deals ``collection`` out."""
    from xdist.scheduler.worksteal import WorkStealingScheduling

    sent: dict[int, list[int]] = {}

    class Node:  # the part of xdist's WorkerController the scheduler uses
        def __init__(self, k: int) -> None:
            self.k, self.gateway, self.shutting_down = k, SimpleNamespace(id=f"gw{k}"), False

        def send_runtest_some(self, indices: list[int]) -> None:
            sent.setdefault(self.k, []).extend(indices)

        def shutdown(self) -> None:
            self.shutting_down = True

    nodes = [Node(k) for k in range(workers)]
    config = SimpleNamespace(getvalue=lambda name: {"tx": ["popen"] * workers}.get(name),
                             option=SimpleNamespace(maxschedchunk=None))
    scheduling = WorkStealingScheduling(config)  # type: ignore[arg-type]
    for node in nodes:
        scheduling.add_node(node)  # type: ignore[arg-type]
        scheduling.add_node_collection(node, collection)  # type: ignore[arg-type]
    scheduling.schedule()
    return [collection[sent[k][0]] for k in range(workers)]


@given(st.integers(min_value=8, max_value=400), st.integers(min_value=1, max_value=6))
def test_each_worker_starts_with_one_of_the_slowest(total: int, workers: int) -> None:
    names = [f"t{i}" for i in range(total)]
    slow = {names[total // 2]: 0, names[-1]: 1, names[3]: 2}  # wherever they were collected
    ordered = lead_order(names, slow.get, workers)
    assert sorted(ordered) == sorted(names)
    started = first_tests(ordered, workers)
    assert set(started) >= set(sorted(slow, key=slow.__getitem__)[:workers])


def test_the_others_keep_their_order() -> None:
    names = [f"t{i}" for i in range(20)]
    ordered = lead_order(names, {"t7": 0, "t12": 1}.get, 4)
    assert [name for name in ordered if name not in ("t7", "t12")] == [n for n in names if n not in ("t7", "t12")]
    assert ordered[0] == "t7" and ordered[first_runs(20, 4)[0]] == "t12"


def test_one_worker_runs_the_slowest_first() -> None:
    assert lead_order(["a", "b", "c", "d"], {"d": 0, "c": 1}.get, 1) == ["d", "c", "a", "b"]


def test_the_next_slowest_go_behind_the_shortest_heads() -> None:
    names = [f"t{i}" for i in range(40)]
    ordered = lead_order(names, {f"t{i}": i for i in range(6)}.get, 4)
    starts = [sum(first_runs(40, 4)[:k]) for k in range(4)]
    assert [ordered[s:s + 2] for s in starts] == [["t0", "t6"], ["t1", "t15"], ["t2", "t5"], ["t3", "t4"]]


def test_the_tests_of_one_rank_stay_together_in_order() -> None:
    names = [f"t{i}" for i in range(40)]
    ordered = lead_order(names, {"t9": 0, "t20": 1, "t21": 1, "t22": 1, "t30": 2}.get, 4)
    assert ordered[first_runs(40, 4)[0]:][:3] == ["t20", "t21", "t22"]
