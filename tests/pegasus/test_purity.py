"""The pure core stays pure: pegasus.task, pegasus.cognitive, the store and the pool core load no Thespian and no actors."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pegasus.cognitive
import pegasus.pool
import pegasus.store
import pegasus.task


def _modules(package) -> list[str]:
    return [package.__name__] + [
        info.name for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    ]


def test_pure_packages_import_neither_thespian_nor_actors() -> None:
    modules = (_modules(pegasus.task) + _modules(pegasus.cognitive) + _modules(pegasus.store) + _modules(pegasus.pool)
               + ["pegasus.idempotency"])
    assert "pegasus.task.fsm" in modules and "pegasus.pool.core" in modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'thespian' or m.startswith(('thespian.', 'actors')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"pure modules loaded: {out.stdout.strip()}"


def test_the_purity_check_can_fail() -> None:
    """Guard against a check that cannot fail: importing the runtime is detected."""
    script = "import sys, thespian.actors\nprint('thespian' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
