"""The core stays below the runtime: no module of pegasus/ loads Thespian or actors (the command line
lives in actors/cli/)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pegasus


def _modules(package) -> list[str]:
    return [package.__name__] + [
        info.name for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    ]


def test_no_module_of_pegasus_loads_thespian_or_actors() -> None:
    modules = _modules(pegasus)
    assert {"pegasus.task.fsm", "pegasus.cognitive.stages", "pegasus.store.sqlite", "pegasus.config",
            "pegasus.pool.core", "pegasus.run.core", "pegasus.worker.core"} <= set(modules)
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'thespian' or m.startswith(('thespian.', 'actors')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"pegasus modules loaded: {out.stdout.strip()}"


def test_the_purity_check_can_fail() -> None:
    """Guard against a check that cannot fail: importing the runtime is detected."""
    script = "import sys, thespian.actors\nprint('thespian' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
