"""Packaging: setup.cfg lists every package; the public surface is what DESIGN.md names."""

from __future__ import annotations

import configparser
from pathlib import Path

import pegasus.task

REPO = Path(__file__).resolve().parents[2]


def test_setup_cfg_lists_every_package() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    listed = {line.strip() for line in cfg["options"]["packages"].splitlines() if line.strip()}
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("pegasus", "actors")
        for init in (REPO / top).rglob("__init__.py")
    }
    assert found | {"pegasus.defaults"} == listed


def test_public_task_surface() -> None:
    """The names DESIGN.md §2 promises to code outside the project."""
    promised = {"TaskFSM", "Event", "EventType", "InvalidStateTransition", "machines", "TaskContext", "Plan",
                "PlanStep", "ActionResult", "Reflection", "PostTaskReflection", "StateTransition"}
    assert promised <= set(pegasus.task.__all__)
    for name in pegasus.task.__all__:
        assert hasattr(pegasus.task, name), name
    assert {m for m in ("classic", "reason_act", "lifecycle")} == set(pegasus.task.machines.names())


def test_the_console_script_is_the_runtime_layers_cli() -> None:
    """Issue 16: the command line was split across pegasus/cli.py and actors/cli.py; it is one, in actors/."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    scripts = dict(line.replace(" ", "").split("=", 1) for line in
                   cfg["options.entry_points"]["console_scripts"].splitlines() if line.strip())
    assert scripts == {"pegasus": "actors.cli:main"}
    assert not (REPO / "pegasus" / "cli.py").exists() and (REPO / "actors" / "cli" / "main.py").exists()
    assert "version = attr: pegasus.__version__" in (REPO / "setup.cfg").read_text()  # one place names it
