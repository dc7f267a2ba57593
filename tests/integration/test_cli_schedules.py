"""``pegasus schedule`` and ``pegasus webhook`` through the real CLI on a running system, with --json.

One system serves the module's tests; what a test only sets up or checks goes through a client (a command is an
interpreter's start and its imports)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.cli import Pegasus, make, start_here, stop_and_check, waited

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pegasus]:
    pegasus = make(tmp_path_factory.mktemp("schedules"), "cli")
    try:
        start_here(pegasus)
        yield pegasus
    finally:
        stop_and_check(pegasus)


def test_schedule_and_webhook_commands(cli: Pegasus, tmp_path) -> None:
    """add, list, trigger, pause, remove (and webhook add, list) answer JSON or a table; errors are named."""
    secret = tmp_path / "hook.secret"
    secret.write_text("shh\n")
    secret.chmod(0o600)
    added, hook, both = cli.many(
        ["schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "America/New_York", "--text", "what is 6 * 7?",
         "--overlap", "buffer_one", "--catchup", "10m", "--priority", "3", "--json"],
        ["webhook", "add", "gh", "--text", 'Review "{pull_request.title}"', "--secret-file", str(secret), "--json"],
        ["schedule", "add", "x", "--cron", "* * * * *", "--every", "1s", "--text", "t"])
    view = json.loads(added.stdout)
    assert (view["overlap"], view["catchup_s"], view["priority"], view["tz"]) == ("buffer_one", 600.0, 3,
                                                                                "America/New_York")
    assert json.loads(hook.stdout)["secret_file"] == str(secret)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    listed, fired, hooks = cli.many(["schedule", "list"], ["schedule", "trigger", "nightly", "--json"],
                                    ["webhook", "list", "--json"])
    assert "cron 30 2 * * * America/New_York" in listed.stdout and "nightly" in listed.stdout
    assert [h["name"] for h in json.loads(hooks.stdout)] == ["gh"] and "shh" not in hooks.stdout
    assert cli.json("schedule", "pause", "nightly")["paused"] is True
    with cli.client() as client:
        assert client.get(json.loads(fired.stdout)["task"]["task_id"])["source"] == "SCHEDULE_FIRED"
    assert cli.json("schedule", "remove", "nightly") == {"name": "nightly", "removed": True}
    gone = cli("schedule", "pause", "nightly", "--json")
    assert gone.returncode == 1 and json.loads(gone.stderr)["error"]["type"] == "ScheduleNotFound"


def test_poison_schedule_values_from_the_cli_exit_1_naming_the_field_and_store_nothing(cli: Pegasus) -> None:
    """The issue's values through the real CLI (110000d was taken, 99999999d exited 1 yet was stored): each exits
    1 naming the field, nothing is stored, and the same supervisor runs a task after."""
    with cli.client() as client:
        pid = client.stats()["supervisor_pid"]
        before = client.schedules()
        cases = [(["--every", "110000d"], "every"), (["--every", "99999999d"], "every"), (["--every", "inf"], "every"),
                 (["--cron", "0 0 30 2 *"], "cron"), (["--cron", "0 0 * 2 MON#5"], "cron"),
                 (["--cron", "* * * * *", "--tz", "Mars/Olympus"], "tz"),
                 (["--every", "1h", "--catchup", "400d"], "catchup")]
        results = cli.many(*(["schedule", "add", "big", *when, "--text", "hi", "--json"] for when, _ in cases))
        for (_, field), result in zip(cases, results):
            assert result.returncode == 1, result
            assert json.loads(result.stderr)["error"]["message"].startswith(field), result.stderr
        assert client.schedules() == before and "big" not in {s["name"] for s in before}
        task = client.submit("what is 2 + 2?")
        assert waited(client, task["task_id"], {"done"})["lifecycle_state"] == "done"
        assert client.stats()["supervisor_pid"] == pid
