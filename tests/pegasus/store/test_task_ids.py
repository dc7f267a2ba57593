"""Task ids by unique prefix (issue 31): the 8-character ids the dashboard and ``watch`` show name their
task; an ambiguous prefix is refused, listing its matches; a whole id or an unknown one is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from pegasus.store import Store
from pegasus.store.task_ids import AmbiguousTaskId, full_task_id, prefix_bounds
from tests.pegasus.store.test_store import new_task

IDS = ["53417d1a" + "0" * 24, "53417d1b" + "1" * 24, "9f00aa11" + "2" * 24]


def test_a_unique_prefix_names_its_task_and_an_ambiguous_one_lists_its_matches(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    for task_id in IDS:
        new_task(store, task_id)
    assert full_task_id(store._query, "53417d1a") == IDS[0]
    assert full_task_id(store._query, "9f") == IDS[2]
    assert full_task_id(store._query, IDS[1]) == IDS[1]
    assert full_task_id(store._query, "ffff") == "ffff"  # unknown: the caller's "unknown task" follows
    with pytest.raises(AmbiguousTaskId, match="'53417d1' is ambiguous: it matches 53417d1a0+, 53417d1b1+; give more"):
        full_task_id(store._query, "53417d1")


@given(st.text(alphabet="0123456789abcdef", min_size=1, max_size=8), st.text(alphabet="0123456789abcdef", max_size=8))
def test_the_bounds_hold_exactly_the_strings_with_the_prefix(prefix: str, rest: str) -> None:
    low, high = prefix_bounds(prefix)
    assert low <= prefix + rest < high
    other = ("0" if prefix[0] != "0" else "1") + prefix[1:]
    assert not low <= other + rest < high
