"""The suite's longest tests start first, each on a worker of its own (tests/support/ordering.py), and a
module sharing a module-scoped fixture runs whole on one worker (tests/support/scheduling.py): checked
against xdist's own worksteal scheduler, handing a collection out to fake workers."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.support.ordering import first_runs, lead_order
from tests.support.scheduling import ModulesWhole


def first_tests(collection: list[str], workers: int) -> list[str]:
    """The test each worker runs first when xdist's WorkStealingScheduling deals ``collection`` out."""
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


def workers_of_each_test(scheduler: type, collection: list[str], speeds: list[int], root: Path) -> dict[str, set[int]]:
    """Which workers ran each test of ``collection`` under ``scheduler``, the workers answering its steals as
    xdist's do; worker k runs a test every ``speeds[k]`` ticks, so the fast ones run dry and steal."""
    queues: dict[int, list[int]] = {}
    asked: list[tuple[Any, list[int]]] = []

    class Node:
        def __init__(self, k: int) -> None:
            self.k, self.gateway, self.shutting_down = k, SimpleNamespace(id=f"gw{k}"), False

        def send_runtest_some(self, indices: list[int]) -> None:
            queues.setdefault(self.k, []).extend(indices)

        def send_steal(self, indices: list[int]) -> None:
            asked.append((self, list(indices)))

        def shutdown(self) -> None:
            self.shutting_down = True

    nodes = [Node(k) for k in range(len(speeds))]
    config = SimpleNamespace(getvalue=lambda name: {"tx": ["popen"] * len(nodes)}.get(name),
                             option=SimpleNamespace(maxschedchunk=None))
    scheduling = ModulesWhole(config, None, root) if scheduler is ModulesWhole else WorkStealingScheduling(config)
    for node in nodes:
        scheduling.add_node(node)
        scheduling.add_node_collection(node, collection)
    scheduling.schedule()
    ran: dict[str, set[int]] = {}
    for tick in range(1, 100 * len(collection)):
        while asked:  # the worker gives back the tests asked for if none of them has started
            node, indices = asked.pop(0)
            stolen = indices if set(indices) <= set(queues[node.k]) else []
            queues[node.k] = [i for i in queues[node.k] if i not in stolen]
            scheduling.remove_pending_tests_from_node(node, stolen)
        for node in nodes:
            if tick % speeds[node.k] == 0 and queues.get(node.k):
                index = queues[node.k].pop(0)
                ran.setdefault(collection[index], set()).add(node.k)
                scheduling.mark_test_complete(node, index)
    assert sorted(ran) == sorted(collection)
    return ran


@given(st.lists(st.integers(min_value=1, max_value=12), min_size=3, max_size=12),
       st.lists(st.integers(min_value=1, max_value=7), min_size=2, max_size=4))
def test_a_module_sharing_a_module_fixture_runs_on_one_worker(sizes: list[int], speeds: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        collection = []
        for m, size in enumerate(sizes):
            shared = m % 2 == 0
            (Path(root) / f"test_m{m}.py").write_text('@pytest.fixture(scope="module")\n' if shared else "")
            collection += [f"test_m{m}.py::test_{t}" for t in range(size)]
        ran = workers_of_each_test(ModulesWhole, collection, speeds, Path(root))
        for m in range(0, len(sizes), 2):
            assert len(set().union(*(ran[t] for t in collection if t.startswith(f"test_m{m}.py::")))) == 1, m


def test_plain_worksteal_splits_such_a_module() -> None:
    """What ModulesWhole is for: xdist's own worksteal cuts a module wherever its slice ends."""
    collection = [f"test_m.py::test_{t}" for t in range(40)]
    ran = workers_of_each_test(WorkStealingScheduling, collection, [1, 3, 5, 7], Path("."))
    assert len(set().union(*ran.values())) > 1
