"""Quarantine of stored records (issue 28): a row written by an old version or a bug, read back by a handler, is
set aside with its error (pegasus.store.quarantine) -- marked in the store, or its one task failed -- never raised."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus import codec
from pegasus.admission import StartRun
from pegasus.store.quarantine import MAX_REASON, reason, sift
from pegasus.store.messages import message_of
from tests.pegasus.admission.test_recovery import admission_on

BAD_DELTA = codec.pack({"format": 1, "delta": {"k": "not a dict of edits"}})  # AttributeError in delta.apply


def poison(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path / "p.db") as db:
        db.execute(sql, params)


def test_sift_yields_the_good_rows_and_sets_aside_each_bad_one_with_its_error() -> None:
    aside: list[tuple[object, str]] = []
    assert list(sift(["1", "x", "3", None], int, lambda row, error: aside.append((row, error)))) == [1, 3]
    assert [row for row, _ in aside] == ["x", None]
    assert aside[0][1].startswith("quarantined: ValueError: invalid literal")
    assert aside[1][1].startswith("quarantined: TypeError")


def test_a_store_that_cannot_be_used_is_never_a_records_fault() -> None:
    """A full disk or an I/O error while a row is read must not quarantine a good record: it is raised, for the
    store's own handling (pegasus.store.health)."""
    from pegasus.store.errors import DiskFull

    def read(row: str) -> str:
        raise DiskFull(Path("/x/p.db"))

    aside: list[object] = []
    with pytest.raises(DiskFull):
        list(sift(["a"], read, lambda row, error: aside.append(row)))
    assert aside == []


def test_a_reason_is_bounded_and_never_says_quarantined_twice() -> None:
    assert len(reason(ValueError("x" * 10_000))) == MAX_REASON
    assert reason(ValueError(reason(KeyError("k")))) == "quarantined: KeyError: 'k'"


@pytest.mark.parametrize(("row", "why"), [
    ((1, "text", b"\xff\xfe"), "can't decode byte 0xff"),
    ((2, "blob", b"hi"), "stored as blob, not text"),
    ((3, "text", b"   "), "is empty"),
    ((4, "text", b"x" * 11), "11 bytes, over [runtime] max_input_bytes = 10"),
    (("five", "text", b"hi"), "'five' is not a positive integer"),
    ((0, "text", b"hi"), "0 is not a positive integer"),
    ((6, "null", None), "stored as null"),
])
def test_a_message_row_this_version_could_not_have_written_is_refused_naming_why(row, why) -> None:
    with pytest.raises(ValueError, match=why.replace("[", r"\[").replace("]", r"\]")):
        message_of(row, 10)


@settings(max_examples=300, deadline=None)
@given(number=st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none(), st.binary(max_size=5)),
       kind=st.sampled_from(["text", "blob", "integer", "real", "null"]),
       raw=st.one_of(st.binary(max_size=64), st.none()),
       limit=st.one_of(st.none(), st.integers(min_value=1, max_value=64)))
def test_message_of_any_row_is_a_message_or_a_value_error_never_another_exception(number, kind, raw, limit) -> None:
    """Whatever an old version or a bug left in the row: a message within the bounds, or ValueError (quarantined)."""
    try:
        seq, text = message_of((number, kind, raw), limit)
    except ValueError:
        return
    assert seq == number >= 1 and text.strip() and (limit is None or len(text.encode()) <= limit)


def test_message_of_gives_number_and_text() -> None:
    assert message_of((7, "text", "héllo".encode()), 10) == (7, "héllo")


def test_bad_messages_of_a_running_task_are_quarantined_once_and_the_task_restarts_with_the_good_ones(
        tmp_path: Path) -> None:
    """On main before this change the undecodable one raised out of restore (sqlite3.OperationalError: Could
    not decode to UTF-8), so the supervisor could not start."""
    first = admission_on(tmp_path)
    task, _ = first.submit("echo hi", "classic", 5, {}, "t")
    assert first.get(task.task_id).state == "running"
    first.store.add_message(task.task_id, "the good one")
    for seq, value in ((2, "CAST(X'FF41' AS TEXT)"), (3, "X'6869'"), (4, f"'{'x' * 70_000}'"), ("'five'", "'hi'")):
        poison(tmp_path, f"INSERT INTO task_messages (task_id, seq, text, created_at) VALUES (?, {seq}, {value}, 'x')",
               task.task_id)
    first.store.add_message(task.task_id, "after them")  # numbered past the bad ones: still taken

    second = admission_on(tmp_path)
    [start] = [e for e in second.restore() if isinstance(e, StartRun)]
    assert [text for _, text in start.inbox] == ["the good one", "after them"]
    marked = second.store.quarantined_messages(task.task_id)
    assert [m["number"] for m in marked] == ["2", "3", "4", "five"]
    assert "UnicodeDecodeError" in marked[0]["error"] and "over [runtime] max_input_bytes" in marked[2]["error"]
    assert second.quarantined == {}  # the task itself is not quarantined: it goes on without them
    third = admission_on(tmp_path)  # not tried again: the mark keeps them out of every later read
    assert [text for _, text in third.store.messages_after(task.task_id, 0)] == ["the good one", "after them"]


def test_a_checkpoint_that_raises_anything_quarantines_its_task_at_restore(tmp_path: Path) -> None:
    """Not only CorruptCheckpoint: a delta of a bad shape raised AttributeError out of restore on main."""
    first = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    bad, _ = first.submit("bad", "classic", 5, {}, "t")
    queued, _ = first.submit("queued with a bad journal", "classic", 5, {}, "t")
    good, _ = first.submit("good", "classic", 5, {}, "t")
    poison(tmp_path, "INSERT INTO checkpoints (task_id, run, kind, state, data, created_at) "
           "VALUES (?, 1, 'delta', 'thinking', ?, 'x')", bad.task_id, BAD_DELTA)
    poison(tmp_path, "INSERT INTO journal (key, task_id, run, step_index, tool, effect, status, result, started_at) "
           "VALUES ('k', ?, 1, 0, 'echo', 'pure', 'finished', X'C1', 'x')", queued.task_id)
    second = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    effects = second.restore()
    assert [e.task_id for e in effects if isinstance(e, StartRun)] == [good.task_id]
    assert "AttributeError" in second.quarantined[bad.task_id]
    assert second.quarantined[queued.task_id].startswith("quarantined: ")
    for task_id in (bad.task_id, queued.task_id):
        row = second.store.task_row(task_id)
        assert (row["lifecycle_state"], row["exit_reason"]) == ("failed", "fatal_error")
        assert row["error"] == second.quarantined[task_id]


def test_a_checkpoint_that_raises_anything_fails_its_task_when_its_run_is_lost(tmp_path: Path) -> None:
    admission = admission_on(tmp_path)
    task, _ = admission.submit("echo hi", "classic", 5, {}, "t")
    poison(tmp_path, "INSERT INTO checkpoints (task_id, run, kind, state, data, created_at) "
           "VALUES (?, 1, 'delta', 'thinking', ?, 'x')", task.task_id, BAD_DELTA)
    admission.on_run_lost(task.task_id, task.run, "its task actor died")
    record = admission.get(task.task_id)
    assert (record.state, record.exit_reason) == ("failed", "fatal_error")
    assert "AttributeError" in record.error and task.task_id in admission.quarantined


def test_a_task_row_whose_columns_will_not_decode_is_quarantined_and_the_others_restored(tmp_path: Path) -> None:
    """On eb89c12 one undecodable metadata blob raised out of unfinished_tasks(): no task was restored at all."""
    first = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    first.submit("runs", "classic", 5, {}, "t")
    bad, _ = first.submit("bad metadata", "classic", 5, {}, "t")
    odd, _ = first.submit("a transition that will not read", "classic", 5, {}, "t")
    poison(tmp_path, "UPDATE tasks SET metadata = X'C1' WHERE task_id = ?", bad.task_id)
    poison(tmp_path, "UPDATE transitions SET detail = X'C1' WHERE task_id = ?", odd.task_id)
    second = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    second.restore()
    assert set(second.quarantined) == {bad.task_id, odd.task_id}
    assert len(second.records) == 1 and second.running
    assert second.store.unfinished_tasks(lambda row, error: None) == second.store.unfinished_tasks()


def test_a_waiting_parent_whose_childs_row_will_not_read_is_quarantined_at_restore(tmp_path: Path) -> None:
    """The tree's restore reads each waiting parent's children: on eb89c12 a done child's undecodable result
    raised out of restore (msgpack FormatError) and the start failed.  Now that parent alone fails."""
    from pegasus.store import Store
    from tests.pegasus.admission.test_subtasks import make, parent_waiting_on_a_child

    store = Store(tmp_path / "p.db")
    _, parent, child = parent_waiting_on_a_child(store)
    store.update_task(child.task_id, lifecycle_state="done")  # ended; its end never reached the parent's journal
    poison(tmp_path, "UPDATE tasks SET result = X'C1' WHERE task_id = ?", child.task_id)
    fresh = make(store)
    fresh.restore()
    assert "FormatError" in fresh.quarantined[parent.task_id]
    assert (fresh.get(parent.task_id).state, fresh.get(parent.task_id).exit_reason) == ("failed", "fatal_error")


def test_a_token_row_that_is_not_text_is_listed_quarantined_and_authenticates_no_one(tmp_path: Path) -> None:
    """On eb89c12 one such row made ``pegasus token list`` fail for everyone (Could not decode to UTF-8)."""
    from pegasus.store import Store, tokens

    store = Store(tmp_path / "p.db")
    tokens.create(store, "good", "h1", "read")
    poison(tmp_path, "INSERT INTO api_tokens (name, token_hash, scope, created_at) VALUES "
           "(CAST(X'FF6F' AS TEXT), 'h2', 'admin', 'then')")
    listed = {t["name"]: t for t in tokens.listed(store)}
    assert listed["good"]["quarantined"] is None and listed["good"]["scope"] == "read"
    assert "UnicodeDecodeError" in listed["\ufffdo"]["quarantined"]
    reader = tokens.TokenReader(tmp_path / "p.db")
    try:
        assert reader.lookup("h1") == {"name": "good", "scope": "read", "token_hash": "h1"}
        assert reader.lookup("h2") is None
    finally:
        reader.close()


def test_a_webhook_row_that_is_not_text_is_listed_quarantined_and_refused(tmp_path: Path) -> None:
    from pegasus.store import Store, triggers

    store = Store(tmp_path / "p.db")
    triggers.add_webhook(store, "good", "echo {x}", b"s", None)
    poison(tmp_path, "INSERT INTO webhooks (name, template, secret, created_at) VALUES ('odd', 'x', '', 'then')")
    views = {w["name"]: w for w in triggers.webhooks(store)}
    assert views["good"]["quarantined"] is None and views["good"]["text"] == "echo {x}"
    assert views["odd"]["quarantined"] == "quarantined: ValueError: its secret is empty"
    assert triggers.webhook(store, "good") == ("echo {x}", b"s", [])
    with pytest.raises(ValueError, match="secret is empty"):
        triggers.webhook(store, "odd")


def test_a_task_whose_text_is_not_utf8_is_quarantined_alone_and_every_list_page_still_reads(tmp_path: Path) -> None:
    """Text only raw SQL can write (not UTF-8): on main it failed the whole query (sqlite3: Could not decode to
    UTF-8 column 'input'), so restore raised and no start got past it; ``list`` failed for every page holding it."""
    first = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    first.submit("runs", "classic", 5, {}, "t")
    bad, _ = first.submit("bad", "classic", 5, {}, "t")
    poison(tmp_path, "UPDATE tasks SET input = CAST(X'FF41' AS TEXT) WHERE task_id = ?", bad.task_id)
    second = admission_on(tmp_path, runtime={"max_active_tasks": 1})
    second.restore()
    assert "UnicodeDecodeError" in second.quarantined[bad.task_id] and len(second.records) == 1
    listed = {t["task_id"]: t for t in second.store.list_tasks()}
    assert listed[bad.task_id]["input"] == "\ufffdA" and listed[bad.task_id]["lifecycle_state"] == "failed"
    row = second.store.task_row(bad.task_id, lenient=True)
    assert row is not None and row["error"] == second.quarantined[bad.task_id]
