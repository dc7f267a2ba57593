"""Commands that must never hurt the user: a bad configuration is refused before any process starts.

An unloadable tool plugin let ``pegasus start`` succeed and every task then failed with
"stage worker received work before WorkerInit" (issue 15).  Now ``start`` and ``run``
exit 1 with one line naming the plugin and its import error, and start nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.runtime.system import is_running
from tests.support.cli import ARITHMETIC, Pegasus, Sampler, make, stop_and_check, assert_failure

pytestmark = pytest.mark.integration


@pytest.fixture
def bad_plugin(tmp_path: Path) -> Iterator[Pegasus]:
    pegasus = make(tmp_path, "plugin", PEGASUS_TOOLS__PLUGINS='["no_such_plugin_module:register"]')
    try:
        yield pegasus
    finally:
        stop_and_check(pegasus)


@pytest.mark.parametrize("command", [("start",), ("run", ARITHMETIC)])
def test_an_unloadable_plugin_refuses_to_start(bad_plugin: Pegasus, command: tuple[str, ...]) -> None:
    with Sampler(bad_plugin.spec) as sampler:
        result = bad_plugin(*command)
    assert_failure(result, "tool plugin 'no_such_plugin_module:register' cannot be loaded",
                   "ModuleNotFoundError: No module named 'no_such_plugin_module'")
    assert sampler.seen[bad_plugin.port] == {}  # no process was ever started for it
    assert not is_running(bad_plugin.spec)
