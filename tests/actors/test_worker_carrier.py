"""The worker carrier's command table (actors/worker.py) has one row for every command its core returns
(pegasus/worker/commands.py): a command without one would raise into Thespian."""

from __future__ import annotations

import typing

from actors.worker import StageWorker
from pegasus.worker.commands import WorkerCommand


def test_every_worker_command_has_a_row_in_the_carriers_table() -> None:
    carrier = StageWorker.__new__(StageWorker)  # the table only: no actor system, no process set-up
    assert set(carrier._commands()) == set(typing.get_args(WorkerCommand))
