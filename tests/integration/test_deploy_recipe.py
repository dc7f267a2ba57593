"""docs/deploy.md's recipe, as written, brings up a leader and a member on hosts of their own (needs root).

The configuration files and the systemd units' ``Environment=``,
``ExecStart=`` and ``ExecStop=`` lines are read from the page; only the
example addresses, the state directory and the path of the ``pegasus``
command are replaced (by the namespaces' addresses, a tmp directory and this
checkout's ``python -m actors.cli``).  The units themselves pass
``systemd-analyze verify`` where it is installed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.runtime import convention as conv
from actors.runtime.system import system_pids
from pegasus import config, files
from tests.support import netns
from tests.support.hosts import Machines, time_bound
from tests.support.waiting import wait_for

from .conftest import PROJECT_ROOT

pytestmark = pytest.mark.integration

PAGE = PROJECT_ROOT / "docs" / "deploy.md"
RECIPE = re.compile(r"<!-- recipe: (\S+) -->\n```\w*\n(.*?)```", re.S)
EXAMPLE = {"leader": "10.8.0.1", "b": "10.8.0.2"}
STATE = "/var/lib/pegasus"
COMMAND = "/usr/local/bin/pegasus"


def recipe() -> dict[str, str]:
    return dict(RECIPE.findall(PAGE.read_text(encoding="utf-8")))


def unit_lines(unit: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(f"{key}=")]


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[Machines]:
    why = netns.unavailable()
    if why:
        pytest.skip(f"no network namespaces here: {why}")
    hosts = netns.Hosts(["leader", "b"])
    machines = Machines(tmp_path, hosts)
    try:
        with time_bound():
            yield machines
    finally:
        machines.close()


def test_the_page_holds_both_configurations_and_both_units() -> None:
    blocks = recipe()
    assert set(blocks) == {"leader.toml", "member.toml", "pegasus-leader.service", "pegasus-member.service"}
    for name in ("pegasus-leader.service", "pegasus-member.service"):
        assert unit_lines(blocks[name], "Environment") == [f"PEGASUS_HOME={STATE}"]
        assert unit_lines(blocks[name], "ExecStop") == [f"{COMMAND} stop"]


def test_the_recipe_brings_up_a_leader_and_a_member_that_runs_tasks_and_stops(machines: Machines,
                                                                              tmp_path: Path) -> None:
    blocks = recipe()
    here = f"{sys.executable} -m actors.cli"

    def local(text: str, host: str) -> str:
        for name, example in EXAMPLE.items():
            text = text.replace(example, machines.hosts.address(name))
        return text.replace(COMMAND, here).replace(STATE, str(machines.root / host))

    def run(host: str, unit: str, key: str) -> None:
        [line] = unit_lines(local(blocks[unit], host), key)
        done = subprocess.run([*machines.hosts.exec_argv(host), *shlex.split(line)], env=machines.env(host),
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{unit} {key}: {done.stderr}"

    for host, toml_name in (("leader", "leader.toml"), ("b", "member.toml")):
        home = machines.root / host
        home.mkdir(mode=0o700)
        (home / "pegasus.toml").write_text(local(blocks[toml_name], host))
    if shutil.which("systemd-analyze"):
        for unit in ("pegasus-leader.service", "pegasus-member.service"):
            path = tmp_path / unit
            path.write_text(local(blocks[unit], "leader").replace("User=pegasus\n", ""))
            verified = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True,
                                      text=True, timeout=60)
            assert verified.returncode == 0, verified.stderr

    def settings(host: str) -> config.Settings:  # as the unit's PEGASUS_HOME gives them
        home = machines.root / host
        return config.load(home / "pegasus.toml").with_overrides({"state": {"home": str(home)}})

    leader_settings = settings("leader")
    run("leader", "pegasus-leader.service", "ExecStart")
    machines.specs["leader"] = conv.leader_spec(leader_settings.with_overrides({"convention": {"lead": True}}))
    machines.pids("leader")
    # The key, copied "over a secure channel": install -m 600 ... /var/lib/pegasus/system.key
    files.write_private(machines.root / "b" / "system.key", (machines.root / "leader" / "system.key").read_bytes())
    run("b", "pegasus-member.service", "ExecStart")
    member = conv.member_spec(settings("b"))
    machines.specs["b"] = member
    machines.pids("b")

    driver = machines.driver()
    wait_for(lambda: sum(1 for part in driver.call("stats")["pools"].values() for w in part["workers"]
                         if w["ready"] and w["member"] == member.member_name) == 6, timeout=30,
             what="the member's 4 llm + 2 tool workers")
    done = [driver.call("wait", t["task_id"], 30) for t in driver.call("submit_many",
                                                                       [f"what is {n} * 2?" for n in range(6)])]
    assert [d["lifecycle_state"] for d in done] == ["done"] * 6
    assert {s["member"] for d in done for s in d["stages"]} == {member.member_name}
    driver.close()
    machines.pids("b")
    run("b", "pegasus-member.service", "ExecStop")
    machines.pids("leader")
    run("leader", "pegasus-leader.service", "ExecStop")
    assert system_pids(member) == [] and system_pids(machines.specs["leader"]) == []
