"""The memory store: facts keep their versions and a repeated write is a no-op, caps refuse naming their config key,
FTS5 ranks the relevant episode first among hundreds and takes any text, forget removes content for good, and
ids are never reused."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pegasus.config import MemorySettings
from pegasus.memory import (BadMemoryPath, MemoryCapExceeded, MemoryNotFound, MemoryStore, MemoryStoreError,
                            check_path)
from pegasus.memory.query import match_expression
from pegasus.store import Store


class Ticks:
    """A clock one second further at each reading (fixed times: identical rows in every run)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def memory(tmp_path: Path, **caps: int) -> MemoryStore:
    return MemoryStore(Store(tmp_path / "pegasus.db"), MemorySettings(**caps), clock=Ticks())


def test_writing_a_path_keeps_its_history_and_the_same_content_again_is_a_no_op(tmp_path: Path) -> None:
    store = memory(tmp_path)
    first = store.write_fact("ops/deploy-key", "The deploy key is in the vault.")
    assert store.write_fact("ops/deploy-key", "The deploy key is in the vault.\n") == first
    second = store.write_fact("ops/deploy-key", "The deploy key is in the safe.")
    assert (first.id, second.id) == ("fact:ops/deploy-key@1", "fact:ops/deploy-key@2")
    assert [f.content for f in store.fact_history("ops/deploy-key")] == [first.content, second.content]
    assert store.read_fact("ops/deploy-key") == second
    assert store.get("fact:ops/deploy-key@1") == first
    assert [f.path for f in store.list_facts()] == ["ops/deploy-key"]


def test_append_with_the_same_key_changes_nothing_the_second_time(tmp_path: Path) -> None:
    store = memory(tmp_path)
    once = store.append_fact("notes/todo", "buy milk", key="t1/a1/i1/s0")
    assert store.append_fact("notes/todo", "buy milk", key="t1/a1/i1/s0") == once
    twice = store.append_fact("notes/todo", "call Bob", key="t1/a1/i1/s1")
    assert twice.content == "buy milk\ncall Bob" and twice.version == 2


def test_only_the_newest_versions_are_kept(tmp_path: Path) -> None:
    store = memory(tmp_path, fact_versions_max=3)
    for n in range(6):
        store.write_fact("counter", f"value {n}")
    assert [f.version for f in store.fact_history("counter")] == [4, 5, 6]


def test_one_episode_per_task(tmp_path: Path) -> None:
    store = memory(tmp_path)
    first = store.add_episode("task-1", "Deployed", "it went well", lesson="check the vault")
    assert store.add_episode("task-1", "Other", "something else") == first
    assert first.id == "episode:1" and store.episodes() == [first]


def test_identical_repeats_of_a_request_and_its_outcome_keep_one_episode(tmp_path: Path) -> None:
    """Issue 31: a schedule's "echo tick" every minute, or the same question asked again, adds nothing."""
    store = memory(tmp_path)
    first = store.add_episode("task-1", "echo tick", "tick", "Request: echo tick\nResult: tick")
    again = [store.add_episode(f"task-{n}", "echo tick", "tick", "Request: echo tick\nResult: tick")
             for n in range(2, 50)]
    assert set(again) == {first} and store.episodes() == [first]
    other = store.add_episode("task-50", "echo tick", "tock", "Request: echo tick\nResult: tock")
    assert other != first and len(store.episodes()) == 2  # another outcome is another episode


def test_the_facts_cap_refuses_with_its_config_key_and_writes_nothing(tmp_path: Path) -> None:
    store = memory(tmp_path, facts_max_bytes=100)
    store.write_fact("a", "x" * 60)
    with pytest.raises(MemoryCapExceeded, match=r"\[memory\] facts_max_bytes is 100") as refused:
        store.write_fact("b", "y" * 50)
    assert refused.value.cap_key == "facts_max_bytes" and refused.value.needed == 110
    assert [f.path for f in store.list_facts()] == ["a"]
    store.write_fact("a", "z" * 100)  # replacing a fact counts its new size only


def test_past_episodes_max_the_oldest_episode_is_dropped(tmp_path: Path) -> None:
    store = memory(tmp_path, episodes_max=3)
    for n in range(5):
        store.add_episode(f"t{n}", f"episode {n}", "summary")
    assert [e.title for e in store.episodes()] == ["episode 4", "episode 3", "episode 2"]
    assert {i.id for i in store.search("episode", k=10)} == {"episode:3", "episode:4", "episode:5"}


def test_the_relevant_episode_is_first_among_hundreds(tmp_path: Path) -> None:
    store = memory(tmp_path)
    topics = ["invoice totals", "weather report", "translate a letter", "count words in a file",
              "list the directory", "summarise the meeting", "sort the numbers", "rename photos"]
    with store.database.group():
        for n in range(400):
            topic = topics[n % len(topics)]
            store.add_episode(f"t{n}", f"Task {n}: {topic}", f"The user asked to {topic}; done in {n % 7} steps.")
        target = store.add_episode("deploy", "Rotated the deploy key",
                                   "Moved the production deploy key into the vault and updated the CI secret.",
                                   lesson="the deploy key lives in the vault")
    found = store.search("where is the deploy key kept?", k=5)
    assert found[0].id == target.id
    assert found[0].text.startswith("Moved the production deploy key")


@pytest.mark.parametrize("text", ['"unbalanced', "NOT", "a AND OR b", "near(x y)", "col:umn*", "^start", "(((",
                                  "'; DROP TABLE memory_facts; --", "", "   ", "?!", "日本語 テキスト", "x" * 5000])
def test_hostile_query_text_never_raises(tmp_path: Path, text: str) -> None:
    store = memory(tmp_path)
    store.write_fact("ops/deploy-key", "The deploy key is in the vault.")
    store.search(text)
    assert store.list_facts()


def test_the_match_expression_quotes_every_word() -> None:
    assert match_expression('where is "the" KEY?') == '"key"'
    assert match_expression("what is it") == '"what" OR "is" OR "it"'  # only stop words: all kept
    assert match_expression("?!") is None


def test_forget_deletes_every_version_and_never_reuses_its_ids(tmp_path: Path) -> None:
    store = memory(tmp_path)
    store.write_fact("secret", "the password is hunter2")
    store.write_fact("secret", "the password is hunter3")
    assert store.forget("secret") == ["fact:secret@1", "fact:secret@2"]
    assert store.search("password hunter2") == [] and store.fact_history("secret") == []
    with pytest.raises(MemoryNotFound):
        store.read_fact("secret")
    assert store.write_fact("secret", "nothing here").version == 4  # 3 is the tombstone
    episode = store.add_episode(None, "Something", "happened")
    assert store.forget(episode.id) == [episode.id]
    assert store.add_episode(None, "Another", "thing").episode_id == episode.episode_id + 1
    with pytest.raises(MemoryNotFound):
        store.forget("episode:99")


def test_search_finds_facts_by_path_and_content_and_skips_the_archive_unless_asked(tmp_path: Path) -> None:
    store = memory(tmp_path)
    store.write_fact("people/alice", "Alice prefers email over phone.")
    store.archive("t9", "email Alice the report", {"answer": "sent"}, {"input": "email Alice the report"})
    assert [i.id for i in store.search("alice email")] == ["fact:people/alice@1"]
    assert [i.id for i in store.search("alice", kinds=("archive",))] == ["task:t9"]
    assert store.archive("t9", "other", None, {}).input == "email Alice the report"  # once per task
    assert store.get("task:t9").context == {"input": "email Alice the report"}


@pytest.mark.parametrize("path", ["", "/abs", "a/../b", "a//b", "Upper", "a b", "x" * 201, ".hidden", "a/.git",
                                  "a/", "semi;colon", "ünï"])
def test_bad_paths_are_refused_with_the_rule_they_break(path: str) -> None:
    with pytest.raises(BadMemoryPath):
        check_path(path)


def test_good_paths() -> None:
    for path in ("a", "ops/deploy-key", "v1.2/notes_x", "a/b/c/d.e"):
        assert check_path(path) == path


def test_empty_content_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="empty"):
        memory(tmp_path).write_fact("a", "  \n ")


def test_words_in_most_rows_are_left_out_without_losing_the_relevant_row(tmp_path: Path) -> None:
    """A word in more than half the rows has BM25 weight ~0: left out, the ranking is the same."""
    store = memory(tmp_path)
    with store.database.group():
        for n in range(30):
            store.add_episode(f"t{n}", f"Weekly report {n}", "Sent the weekly report to the team.")
        vault = store.add_episode("v", "Report on the vault", "The weekly report names the vault's new code.")
    assert store.search("weekly report vault", k=3)[0].id == vault.id
    assert len(store.search("weekly report", k=3)) == 3  # only common words: the rarest still finds
    assert store.search("zebra") == []
    store.write_fact("animals/zebra", "A zebra lives in the zoo.")  # a word new to the index is found at once
    assert [item.id for item in store.search("zebra")] == ["fact:animals/zebra@1"]


def _search_steps(store: MemoryStore, text: str) -> tuple[int, list[str]]:
    """SQLite virtual-machine steps (in thousands) one search takes, and what it found: a cost that does not
    depend on the machine's speed or load."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store.database.db.set_progress_handler(count, 1000)
    try:
        found = [item.id for item in store.search(text, 5)]
    finally:
        store.database.db.set_progress_handler(None, 0)
    return steps[0], found


def test_a_request_repeated_thousands_of_times_is_recalled_without_ranking_every_episode(tmp_path: Path) -> None:
    """Regression: every word of a repeated request is in every episode, so the search ranked them all (the
    supervisor's recall grew with the memory: 65.7 tasks/s at 10,000 in a burst against 99.4 without memory).
    Now only the newest rows are ranked then: the cost stays flat, and the newest episode still comes first."""
    store = memory(tmp_path)
    costs = []
    for total in (1500, 6000):
        # Written as an import writes them (ids given: no look for a repeat, one commit): the same rows and ids.
        with store.database.group():
            for n in range(len(store.episodes()), total):
                store.add_episode(f"t{n}", "count the lines in setup.cfg", f"setup.cfg has {n} lines",  # distinct outcomes
                                  episode_id=n + 1)
        steps, found = _search_steps(store, "count the lines in setup.cfg")
        assert found[0] == f"episode:{total}"  # the newest first
        costs.append(steps)
    assert costs[1] < 2 * costs[0], costs  # four times the episodes: not four times the work
