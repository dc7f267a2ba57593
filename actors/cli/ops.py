"""What an operator asks of the store: ``pegasus logs ID [--follow]``, ``pegasus delete ID``,
``pegasus purge --older-than DAYS [--state S]``, each a request of the running system.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from actors.cli import views
from actors.cli.base import EXIT_OK, ask, emit, settings_of

FOLLOW_POLL_S = 0.5  # --follow: how often the log is asked for what is new


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    p = command("logs", logs, "a task's log: transitions, stage errors, model step-downs, tool output, in order")
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument("--follow", "-f", action="store_true", help="go on printing until the task ends (Ctrl-C stops)")
    p = command("delete", delete, "delete a finished task and its sub-tasks (their transitions, checkpoints and "
                "journal too; memory stays: pegasus memory forget task:ID)")
    p.add_argument("task_id", metavar="TASK_ID")
    p = command("purge", purge, "delete the finished task trees last changed more than DAYS days ago "
                "(memory stays)")
    p.add_argument("--older-than", dest="older_than", type=days, required=True, metavar="DAYS",
                   help="age in days (fractions allowed: 0.5 is 12 hours)")
    p.add_argument("--state", choices=("done", "failed", "canceled"), help="only trees whose task ended so")


def days(text: str) -> float:
    """An argparse type: days, a finite number from 0 to 36500."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of days") from None
    if not 0 <= value <= 36500:  # NaN too
        raise argparse.ArgumentTypeError(f"{text[:40]} is out of range (0 to 36500 days)")
    return value


def entry_line(entry: dict[str, Any]) -> str:
    """One line of the log as a person reads it (its text escaped: it may be a model's or a tool's)."""
    at = str(entry.get("at", ""))[11:23]
    kind = entry["kind"]
    if kind == "transition":
        where = "lifecycle" if entry["machine"] == "lifecycle" else f"run {entry['run']}"
        extra = f"  {entry['reason']}" if entry.get("reason") else ""
        if entry.get("stage"):
            extra += f"  [{entry['stage']} {entry.get('seconds', 0):.3f}s{', ' + entry['worker'] if 'worker' in entry else ''}]"
        return f"{at}  {where:<9} {entry['from_state']:>10} -> {entry['to_state']:<10} {entry['event']}{views.clean(extra)}"
    if kind == "error":
        return f"{at}  ERROR     {entry.get('stage') or ''}: {views.clean(entry['error'])}"
    if kind == "step_down":
        return f"{at}  STEP DOWN {entry.get('stage') or ''}: {views.clean(entry['change'])}"
    if kind == "tool":
        shown = entry["output"] if entry["success"] else entry["error"]
        text = shown if isinstance(shown, str) else json.dumps(shown, default=str)
        return (f"{at}  tool      step {entry['step_index']} {entry.get('tool') or ''} "
                f"{'ok' if entry['success'] else 'FAILED'}: {views.clean(text)[:500]}")
    return f"{at}  {kind}"


def logs(args: argparse.Namespace) -> int:
    from actors import messages as m
    if not args.follow:
        page = ask(args, m.TaskLog(task_id=args.task_id))
        emit(args, page, "\n".join([entry_line(e) for e in page["entries"]] + _unknown(page)))
        return EXIT_OK
    from actors.client import Client
    from actors.runtime.system import SystemNotRunningError
    after = 0
    try:
        client = Client.connect(settings_of(args))
    except SystemNotRunningError:  # nothing will change it: the stored log, once (ask reads the store)
        args.follow = False
        return logs(args)
    with client:
        while True:  # one connection; what is new, every FOLLOW_POLL_S, until the task has ended
            page = client.ask(m.TaskLog(task_id=args.task_id, after=after))
            for entry in page["entries"]:
                print(json.dumps(entry, default=str) if args.json else entry_line(entry), flush=True)
            after = page["next"]
            if page["finished"]:
                if not args.json:
                    print("\n".join(_unknown(page)) or f"(task {page['lifecycle_state']})", flush=True)
                return EXIT_OK
            if not page["more"]:
                time.sleep(FOLLOW_POLL_S)


def _unknown(page: dict[str, Any]) -> list[str]:
    return [f"EFFECT UNKNOWN  step {e['step_index']} {e.get('tool') or ''} (run {e['run']}, started {e['started_at']})"
            for e in page.get("effects_unknown") or []]


def delete(args: argparse.Namespace) -> int:
    from actors import messages as m
    done = ask(args, m.DeleteTask(task_id=args.task_id))
    emit(args, done, f"deleted {done['count']} task(s): {', '.join(done['deleted'])}")
    return EXIT_OK


def purge(args: argparse.Namespace) -> int:
    from actors.client import Client
    with Client.connect(settings_of(args)) as client:
        done = client.purge(args.older_than, args.state)
    emit(args, done, f"deleted {done['count']} task(s)"
                     + (f"; {done['skipped']} tree(s) kept: a task under them has not finished" if done["skipped"] else ""))
    return EXIT_OK
