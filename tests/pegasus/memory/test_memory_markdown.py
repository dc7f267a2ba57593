"""Export writes facts/<path>.md and episodes/YYYY-MM.md that import reads back exactly; an edited file becomes a new
version; bad files name the file and the line; the identity comes from [agent] or identity.md, which wins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pegasus.config import AgentSettings, Settings
from pegasus.memory import MemoryFormatError, MemoryStore, MemoryStoreError, identity_of, load_identity
from pegasus.memory import markdown
from pegasus.memory.identity import CONFIG_SOURCE
from pegasus.memory.transfer import export_dump, import_dump
from pegasus.store import Store
from tests.pegasus.memory.test_memory_store import Ticks


def filled(path: Path) -> MemoryStore:
    store = MemoryStore(Store(path), clock=Ticks())
    store.write_fact("ops/deploy-key", "The deploy key is in the vault.\n# not a heading\n\\ a backslash line",
                     task_id="t0")
    store.write_fact("ops/deploy-key", "The deploy key is in the safe.\n\n  indented")
    store.write_fact("notes", "hello")
    store.add_episode("t1", "Deploy\nthe app", "We deployed.\n## looks like a heading", "step 1\n\nstep 2",
                      "check the vault first")
    store.add_episode(None, "Manual entry", "only a summary")
    return store


def test_export_then_import_then_export_writes_the_same_files(tmp_path: Path) -> None:
    files = markdown.render(export_dump(filled(tmp_path / "a.db")))
    assert sorted(files) == ["episodes/2026-11.md", "facts/notes.md", "facts/ops/deploy-key.md"]
    assert files["facts/ops/deploy-key.md"].startswith("---\npath: ops/deploy-key\nversion: 2\n")
    markdown.write_dir(tmp_path / "out", files)
    fresh = MemoryStore(Store(tmp_path / "b.db"))
    assert import_dump(fresh, markdown.read_dir(tmp_path / "out")) == {
        "facts_written": 2, "facts_unchanged": 0, "episodes_written": 2, "episodes_unchanged": 0}
    assert markdown.render(export_dump(fresh)) == files
    again = import_dump(fresh, markdown.read_dir(tmp_path / "out"))
    assert again["facts_written"] == again["episodes_written"] == 0


def test_an_edited_file_imports_as_a_new_version_and_an_edited_episode_in_place(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db")
    markdown.write_dir(tmp_path / "out", markdown.render(export_dump(store)))
    fact = tmp_path / "out" / "facts" / "notes.md"
    fact.write_text(fact.read_text().replace("hello", "hello again"))
    month = tmp_path / "out" / "episodes" / "2026-11.md"
    month.write_text(month.read_text().replace("only a summary", "a better summary"))
    import_dump(store, markdown.read_dir(tmp_path / "out"))
    assert store.read_fact("notes").version == 2 and store.read_fact("notes").content == "hello again"
    assert store.episode(2).summary == "a better summary"


def test_export_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.md").write_text("x")
    with pytest.raises(MemoryStoreError, match="not an empty directory"):
        markdown.write_dir(tmp_path / "out", {})


@pytest.mark.parametrize("name, text, line, problem", [
    ("facts/a.md", "path: a\n", 1, "expected '---'"),
    ("facts/a.md", "---\nversion: 1\ncolour: red\n---\nx\n", 3, "path|version|updated_at|task"),
    ("facts/a.md", "---\nversion: one\n---\nx\n", 2, "version must be a number"),
    ("facts/a.md", "---\nversion: 1\n", 1, "no closing"),
    ("facts/Bad Name.md", "---\n---\nx\n", 1, "only a-z"),
    ("episodes/2026-11.md", "# Episodes\n\n## T\n- colour: red\n", 4, "- id|task|when"),
    ("episodes/2026-11.md", "# Episodes\n\n## T\n### Summary\n\n#tag\n", 6, "unexpected heading"),
    ("episodes/2026-11.md", "# Episodes\n\n## T\n### Mood\n", 4, "unknown section"),
    ("episodes/2026-11.md", "# Episodes\n\n## T\n- id: seven\n", 3, "bad id"),
    ("episodes/november.md", "# Episodes\n", 1, "YYYY-MM.md"),
    ("readme.txt", "hi", 1, "not a memory file"),
])
def test_a_bad_file_names_the_file_and_the_line(name: str, text: str, line: int, problem: str) -> None:
    with pytest.raises(MemoryFormatError, match=problem) as bad:
        markdown.parse({name: text})
    assert (bad.value.file, bad.value.line) == (name, line)
    assert str(bad.value).startswith(f"{name}:{line}: ")


def test_identity_from_config_or_from_the_file_which_wins(tmp_path: Path) -> None:
    agent = AgentSettings(name="Ada", role="a careful release engineer", instructions="Never deploy on Fridays.")
    assert identity_of(agent, None).text == "You are Ada, a careful release engineer.\n\nNever deploy on Fridays."
    assert identity_of(agent, None).source == CONFIG_SOURCE
    settings = Settings.model_validate({"state": {"home": str(tmp_path)}, "agent": agent.model_dump()})
    assert load_identity(settings).source == CONFIG_SOURCE
    file = tmp_path / "identity.md"
    file.write_text("# Ada\nI keep releases boring.\n")
    file.chmod(0o600)
    assert load_identity(settings).text == "# Ada\nI keep releases boring."
    assert load_identity(settings).source == str(file)
    os.chmod(file, 0o666)
    with pytest.raises(MemoryStoreError, match="may be written by other users"):
        load_identity(settings)
