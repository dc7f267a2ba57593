"""The store read with no system running (issue 31): a read-only connection answers as the supervisor would,
beside a writer too, and can write nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pegasus import requests as r
from pegasus.store import Store, StoreError
from pegasus.store.reader import StoreReader, answer_read
from pegasus.task.errors import TaskNotFoundError
from tests.pegasus.store.test_store import new_task

TASK = "53417d1a" + "0" * 24


def test_a_reader_answers_reads_beside_a_writer_and_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "pegasus.db")
    new_task(store, TASK)
    reader = StoreReader.of_state_dir(tmp_path)
    try:
        assert answer_read(reader, r.Get(task_id="53417d1a"))["task_id"] == TASK
        assert answer_read(reader, r.Get(task_id=TASK), 3)["max_attempts"] == 3  # the settings': status shows it
        assert answer_read(reader, r.ListTasks())["total"] == 1
        assert answer_read(reader, r.Tree(task_id=TASK))["children"] == []
        new_task(store, "other")  # the writer goes on; the reader sees its commits
        assert answer_read(reader, r.ListTasks())["total"] == 2
        with pytest.raises(TaskNotFoundError):
            answer_read(reader, r.History(task_id="nope"))
        with pytest.raises(StoreError, match="read-only"):
            new_task(reader, "third")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.db.execute("DELETE FROM tasks")
    finally:
        reader.close()
    assert store.count_tasks() == 2


def test_no_store_file_is_no_reader_and_none_is_made(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store"):
        StoreReader.of_state_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_each_read_has_an_answer_of_its_own_found_by_its_class_and_any_other_request_is_refused(tmp_path: Path) -> None:
    """No chain of tests over the requests: ``ANSWERS`` has one row per read, and READS is its keys."""
    from pegasus.store.reader import ANSWERS, READS
    assert set(ANSWERS) == set(READS) == {r.Get, r.History, r.ListTasks, r.Tree, r.TaskLog}
    assert len(set(ANSWERS.values())) == len(ANSWERS)
    Store(tmp_path / "pegasus.db")
    reader = StoreReader.of_state_dir(tmp_path)
    try:
        with pytest.raises(ValueError, match="Cancel is not a read of the store"):
            answer_read(reader, r.Cancel(task_id=TASK))
        with pytest.raises(TaskNotFoundError):
            answer_read(reader, r.History(task_id=TASK))
    finally:
        reader.close()
