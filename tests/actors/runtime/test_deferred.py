"""What the launcher holds, and so every process of a system (actors/runtime/deferred.py, docs/memory.md).

Each probe runs in a fresh interpreter as the launcher starts: ``LAUNCHER``'s first statement, then the actor
tree and every pydantic schema built (``preload_system``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from actors.runtime.system import LAUNCHER

# importlib.metadata and what it brings: pydantic's plugin scan, and before, the Thespian version check.
UNUSED = ("importlib.metadata", "email", "csv")
PRELOAD = """
import json, sys
{first}
from actors.runtime import sharing
sharing.preload_system(freeze_here=False)
from actors.wire import thespian_patches
checked = thespian_patches.check()
held = sorted(sys.modules)
from pydantic import BaseModel
class Late(BaseModel):  # a model built after the preload (a pool's, a worker's) loads nothing more either
    x: int
print(json.dumps({{"held": held, "late": sorted(set(sys.modules) - set(held)), "version": checked.version,
                   "metadata": type(sys.modules.get("importlib.metadata")).__name__}}))
"""


def probe(first: str, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PRELOAD.format(first=first)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def launcher() -> dict:
    """One probe of the launcher as it starts, its main module loaded, for the tests that read it (each probe is
    a fresh interpreter's preload: ~0.6 s of CPU)."""
    return probe(LAUNCHER.split("; from actors.launcher")[0] + "\nfrom actors.launcher import main")


def unused(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == root or name.startswith(root + ".") for root in UNUSED)]


def test_the_launcher_holds_no_importlib_metadata_nor_email(launcher: dict) -> None:
    """Failed before: the launcher held importlib.metadata, email and csv (32 modules, ~2 MiB of its heap, shared
    by all 14 processes of an idle system), for Thespian's version and pydantic's plugin scan."""
    report = launcher
    assert report["version"] == "4.0.1"  # read from Thespian's dist-info
    assert report["metadata"] == "_OnFirstUse"  # its stand-in: nothing of it loaded
    assert unused(report["held"]) == ["importlib.metadata"] and unused(report["late"]) == []


def test_importlib_metadata_still_answers_where_read() -> None:
    report = probe("from actors.runtime.deferred import defer_metadata; defer_metadata()\n"
                   "from importlib import metadata; assert metadata.version('pydantic')\n"
                   "import importlib.metadata as again; assert again.PackageNotFoundError is metadata.PackageNotFoundError")
    assert "email" in report["held"] and report["metadata"] == "module"  # loaded once read: the real one


def test_a_users_pydantic_plugins_setting_wins() -> None:
    """Set (here to scan for plugins: no name is disabled), pydantic's plugin scan runs, and loads the module."""
    report = probe("from actors.runtime.deferred import defer_metadata; defer_metadata()", PYDANTIC_DISABLE_PLUGINS="")
    assert "importlib.metadata" in report["held"] and report["metadata"] == "module"


def test_the_launcher_holds_no_toml_reader_nor_cron_library(launcher: dict) -> None:
    """Failed before: every process of a system held tomllib (its settings come as JSON) and cronsim with calendar
    (read only for a cron schedule), ~0.4 MiB of the launcher's heap.  Both still load where used."""
    report = launcher
    held = set(report["held"]) | set(report["late"])
    assert {"tomllib", "cronsim", "calendar"} & held == set()
    from pegasus.config import parse_toml
    from pegasus.triggers.schedules import make_spec, next_slot
    assert parse_toml("[llm]\nprovider = 'offline'") == {"llm": {"provider": "offline"}}
    spec = make_spec("nightly", "tidy up", cron="0 3 * * *", now=0.0)
    assert next_slot(spec, 0.0) == 3 * 3600.0
