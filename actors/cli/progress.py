"""What the CLI shows on a terminal while it waits: ``run``'s spinner (the stage running and for how long),
``submit --file``'s and ``wait``'s progress bars (Rich).  Not on a terminal (a pipe, a file, ``--json``),
nothing of this is drawn and the plain lines stay exactly as they were.

Also ``pegasus wait ID...``: wait for tasks to end, a line for each as it does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from actors import messages as m
from actors.cli.base import EXIT_FAILURE, EXIT_OK, EXIT_WAITING, duration, emit, error, settings_of
from actors.client.client import TERMINAL_LIFECYCLE, Client
from pegasus.errors import PegasusError
from pegasus.task import machines
from pegasus.task.names import LifecycleState, MachineName

if TYPE_CHECKING:  # Rich is imported where something is drawn: not on a terminal, a command never loads it
    from rich.console import Console
    from rich.status import Status
    from rich.text import Text

ENDED = TERMINAL_LIFECYCLE | {LifecycleState.BLOCKED}  # wait stops there too: a blocked task waits for a person
POLL_S = 0.2


class StageSpinner:
    """``run``'s spinner: the stage the task runs now and how long it has run (on stdout, a terminal only).

    Printing goes on above it (Rich's Live redirects stdout); it is paused while a model's answer streams
    (a line written in pieces) and shown again at the next transition.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.label = "submitted"
        self.since = time.monotonic()

    @classmethod
    def on(cls, shown: bool) -> StageSpinner | None:
        if not shown:
            return None
        from rich.console import Console
        return cls(Console())

    def __rich__(self) -> Text:
        from rich.text import Text
        return Text(f"{self.label}  {time.monotonic() - self.since:.1f}s")

    def saw(self, notice: m.TransitionNotice) -> None:
        """A transition: the stage its new state runs (a cognitive one), or the lifecycle state."""
        label = notice.to_state
        if notice.machine != MachineName.LIFECYCLE:
            runs = machines.get(notice.machine).stages.get(notice.to_state)
            label = f"{runs.stage} ({notice.to_state})" if runs is not None else notice.to_state
        if label != self.label:
            self.label, self.since = label, time.monotonic()
        if self.status is None:
            self.status = self.console.status(self)
            self.status.start()

    def pause(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


@contextmanager
def bar(shown: bool, description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (a terminal only); yields ``advance(n)``."""
    if not shown:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # Lines printed meanwhile go above the bar when stdout is this terminal too, else straight to stdout.
    with Progress(*columns, console=Console(stderr=True), transient=True, redirect_stdout=sys.stdout.isatty(),
                  redirect_stderr=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def on_terminal(args: argparse.Namespace, stream: Any) -> bool:
    return not getattr(args, "json", False) and stream.isatty()


# -- pegasus wait ----------------------------------------------------------------------------------------


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    p = command("wait", wait, "wait for tasks to end (done, failed, canceled, or blocked waiting for a person)")
    p.add_argument("task_ids", nargs="+", metavar="TASK_ID")
    p.add_argument("--timeout", type=duration, default=300.0, metavar="SECONDS", help="how long to wait (default 300)")


def wait(args: argparse.Namespace) -> int:
    """A line per task as it ends (``ID STATE``); exit 0 when all are done, 3 when the others are and some
    wait for a person, 1 when one failed or was canceled."""
    ids = list(dict.fromkeys(args.task_ids))
    finals: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + args.timeout
    with Client.connect(settings_of(args)) as client, \
            bar(on_terminal(args, sys.stderr), "tasks ended", len(ids)) as advance:
        while len(finals) < len(ids):
            for task_id in (t for t in ids if t not in finals):
                task = client.get(task_id)
                if task["lifecycle_state"] in ENDED:
                    finals[task_id] = task
                    advance(1)
                    if not args.json:
                        print(f"{task_id} {task['lifecycle_state']}", flush=True)
            if len(finals) < len(ids):
                if time.monotonic() >= deadline:
                    raise PegasusError(f"{len(ids) - len(finals)} of {len(ids)} tasks still going after "
                                       f"{args.timeout:g}s")
                time.sleep(POLL_S)
    if args.json:
        emit(args, [finals[t] for t in ids], "")
    states = [finals[t]["lifecycle_state"] for t in ids]
    if all(state == LifecycleState.DONE for state in states):
        return EXIT_OK
    if all(state in (LifecycleState.DONE, LifecycleState.BLOCKED) for state in states):
        return EXIT_WAITING
    bad = [t for t in ids if finals[t]["lifecycle_state"] not in (LifecycleState.DONE, LifecycleState.BLOCKED)]
    error(f"{len(bad)} of {len(ids)} tasks did not end done: {', '.join(bad[:5])}", "TaskFailed",
          as_json=args.json)
    return EXIT_FAILURE

