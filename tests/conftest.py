"""Suite-wide settings: nothing is written to the working directory, no time limit is a test's, the
longest tests start first, and a module sharing a module-scoped fixture runs on one xdist worker.

Hypothesis keeps an example database in ./.hypothesis by default; the suite writes nothing to the
working directory, so keep none; its other files (the Unicode tables ``st.text`` draws from, ~1 s of CPU
to build in each process that finds none) go to a private directory per user, kept between runs and
checkouts.  Its per-example deadline (200 ms) and its too_slow health check are wall-clock limits a
loaded machine breaks: off for every property test (a time is a benchmark's).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.ordering import lead_order
from tests.support.pythonpath import absolute

if os.environ.get("PYTHONPATH"):  # every process a test starts imports the tree under test, wherever it runs
    os.environ["PYTHONPATH"] = absolute(os.environ["PYTHONPATH"], os.getcwd())


def _hypothesis_home() -> str:
    """Where Hypothesis keeps its files: the user's private directory in the temporary one; a fresh one
    where that is a link or another user's (a shared /tmp)."""
    home = Path(tempfile.gettempdir()) / f"pegasus-hypothesis-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        home.mkdir(mode=0o700)
    found = os.lstat(home)
    if stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077:
        return str(home)
    return tempfile.mkdtemp(prefix="pegasus-hypothesis-")


os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", _hypothesis_home())  # read at its first file, not here
settings.register_profile("pegasus", database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pegasus")

# The longest tests, longest first (measured: docs/testing.md): each starts at once on an xdist worker of
# its own while the others share out the rest; a node id or a prefix of one.  A module sharing a module
# fixture is one entry and runs whole on one worker (tests/support/scheduling.py), so a long one goes here
# or it ends the run alone; the others one each, so they run side by side.
SLOW_FIRST = (
    "tests/integration/test_real_model.py",
    "tests/pegasus/test_typing.py",
    "tests/integration/test_openapi_conformance.py",
    "tests/integration/test_litellm_proxy.py",
    "tests/integration/test_benchmarks_quick.py::test_quick_run_of_each_scenario_exits_zero_and_writes_its_figures[cpu]",
    "tests/integration/test_mcp_effects.py::test_an_mcp_call_whose_outcome_is_unknown_is_never_sent_again[http]",
    "tests/integration/test_benchmarks_quick.py::test_quick_run_of_each_scenario_exits_zero_and_writes_its_figures[mcp]",
    "tests/integration/test_mcp_effects.py::test_an_mcp_call_whose_outcome_is_unknown_is_never_sent_again[stdio]",
    "tests/integration/test_hosts.py::test_a_cut_member_loses_no_task_repeats_no_effect_and_rejoins_by_itself",
    "tests/integration/test_hosts.py::test_a_killed_member_and_a_killed_leader_lose_no_task_and_the_members_come_back",
    "tests/integration/test_task_actors.py::test_200_tasks_in_flight_run_on_at_most_the_ceiling_of_task_actors",
    "tests/integration/test_frame_limits.py::test_runs_restored_together_after_a_restart_all_start_though_their_starts",
    # Modules sharing a fixture, whole on one worker: heads too, but after the others (a run that started
    # them first, all beside the llama server, was no faster: docs/testing.md).
    "tests/integration/test_dashboard.py",
    "tests/integration/test_cli_background.py",
    "tests/integration/test_dashboard_views.py",
)


def _rank(item: pytest.Item) -> int | None:
    return next((rank for rank, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every worker collects the same order (xdist checks): the slow tests at the heads of the runs
    ``--dist worksteal`` first hands out (tests/support/ordering.py)."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = lead_order(items, _rank, workers)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """worksteal that keeps a module sharing a module-scoped fixture on one worker (tests/support/scheduling.py)."""
    if config.getvalue("dist") != "worksteal":
        return None
    # It subclasses xdist's scheduler: imported only where xdist runs the suite.
    from tests.support.scheduling import ModulesWhole

    return ModulesWhole(config, log, config.rootpath)
