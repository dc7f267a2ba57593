"""Process titles: what ``ps`` shows for each process of a system (the live titles: tests/integration/test_cli_background.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from setproctitle import getproctitle

from actors.runtime import titles


def test_a_title_names_the_role_and_the_state_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    assert titles.title("supervisor", Path("/home/ada/.pegasus")) == "pegasus: supervisor [~/.pegasus]"
    assert titles.title("llm worker 2", "/srv/pegasus") == "pegasus: llm worker 2 [/srv/pegasus]"
    assert titles.home_label("/home/adam/x") == "/home/adam/x"  # not under /home/ada
    assert titles.title("launcher") == "pegasus: launcher"


def test_set_title_leaves_a_process_that_is_not_a_systems_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simpleSystemBase runs its actors in this (the test) process: its title must stay."""
    before = getproctitle()
    monkeypatch.setattr(titles, "_system", (19190, Path("/srv/pegasus")))
    titles.set_title("llm worker 0")
    assert getproctitle() == before
