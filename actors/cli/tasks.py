"""Commands about tasks: run, submit, status, list, history, suspend, resume, cancel, approve, retry.

``run`` uses the running system (``pegasus start``) or starts an embedded one for the
one task and shuts it down afterwards; every other command attaches to the running
system and fails with a one-line reason when there is none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors import messages as m
from actors.cli import views
from actors.cli.base import (
    EXIT_EFFECTS_UNKNOWN, EXIT_FAILURE, EXIT_OK, EXIT_WAITING, ask, emit, error, refuse_other_task_settings,
    settings_of,
)
from actors.client import Client
from actors.runtime.system import SystemNotRunningError
from pegasus.errors import PegasusError
from pegasus.idempotency import MAX_KEY_LENGTH
from pegasus.requests import View
from pegasus.task.names import LifecycleState


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    try:
        client = Client.connect(settings)
        started = False
    except SystemNotRunningError:
        client = Client.start(settings)
        started = True
    with client:
        if not started:
            refuse_other_task_settings(settings, client)
        task = client.submit(args.text, machine=args.machine, tier=args.tier, priority=args.priority, follow=True,
                             metadata={"workspace": os.getcwd()}, source="cli")
        if not args.json:
            print(f"task {task['task_id']} submitted ({task['machine']}"
                  f"{', embedded system' if started else ''})", flush=True)
            if task["lifecycle_state"] == LifecycleState.DRAFT:  # manual approval: say what it waits for
                print(f"  waiting for approval ([runtime] approval_policy = \"manual\"): "
                      f"pegasus approve {task['task_id'][:8]}", flush=True)
        notices = []
        answer = views.AnswerPrinter()
        from actors.cli import progress  # rich: imported by the commands that draw
        spinner = progress.StageSpinner.on(progress.on_terminal(args, sys.stdout))  # a terminal only
        try:
            for notice in client.follow(task["task_id"], timeout=args.timeout, subscribe=False):
                if isinstance(notice, m.TextDelta):  # the answer as it is written (not in --json: not stored)
                    if not args.json:
                        if spinner is not None:
                            spinner.pause()
                        answer.write(notice)
                    continue
                notices.append(notice.__dict__)
                if not args.json:
                    answer.end()
                    print(views.notice_line(notice), flush=True)
                    if spinner is not None:
                        spinner.saw(notice)
        except TimeoutError as exc:  # a one-line reason, not a traceback
            answer.end()
            after = "the embedded system stops now" if started else f"it goes on: pegasus status {task['task_id']}"
            raise PegasusError(f"{exc}; {after}") from None
        finally:
            if spinner is not None:
                spinner.pause()
        final = client.get(task["task_id"])
    if args.json:
        print(json.dumps({"task": final, "transitions": notices}, indent=2, default=str))
    else:
        print(views.task_text(final))
        if final["lifecycle_state"] == LifecycleState.BLOCKED and started:
            print("  (the embedded system stops now; use `pegasus start` to keep tasks you can resume)")
    state = final["lifecycle_state"]
    if state == LifecycleState.DONE:
        return EXIT_OK
    if state == LifecycleState.BLOCKED:
        return EXIT_WAITING
    error(f"task {state}: {final.get('error') or state}", f"Task{state.capitalize()}", as_json=args.json,
          task_id=final["task_id"])
    return EXIT_EFFECTS_UNKNOWN if final.get("effects_unknown") else EXIT_FAILURE


def submit(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.file is None):
        raise PegasusError("give the task's text, or --file PATH with one task per line (not both)")
    if args.key is not None and not 0 < len(args.key) <= MAX_KEY_LENGTH - 8:  # room for --file's ':n'
        raise PegasusError(f"--key must be 1 to {MAX_KEY_LENGTH - 8} characters")
    if args.file is not None:
        return _submit_file(args)
    settings = settings_of(args)
    with Client.connect(settings) as client:
        refuse_other_task_settings(settings, client)
        task = client.ask(m.Submit(text=args.text, machine=args.machine, tier=args.tier, priority=args.priority,
                                   metadata={"workspace": os.getcwd()}, source="cli", key=args.key))
    if task.get("existing") and not args.json:
        print(f"pegasus: key {views.clean(args.key)!r} was used before: its task is {task['task_id']}",
              file=sys.stderr)
    emit(args, task, task["task_id"])
    return EXIT_OK


def _submit_file(args: argparse.Namespace) -> int:
    """One task per non-empty line, sent in batches of ``messages.MAX_BATCH`` (each all or none)."""
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PegasusError(f"cannot read {args.file}: {exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise PegasusError(f"{args.file} holds no task (one per line)")
    # With --key K, task n of the file has the key K:n: submitting the file again creates none twice.
    tasks = [{"text": line, "metadata": {"workspace": os.getcwd()}, "source": "cli",
              **({"key": f"{args.key}:{n}"} if args.key else {})} for n, line in enumerate(lines, 1)]
    submitted: list[dict[str, Any]] = []
    from actors.cli import progress
    settings = settings_of(args)
    with Client.connect(settings) as client, \
            progress.bar(progress.on_terminal(args, sys.stderr), "tasks submitted", len(tasks)) as advance:
        refuse_other_task_settings(settings, client)
        for first in range(0, len(tasks), m.MAX_BATCH):
            try:
                submitted += client.submit_many(tasks[first:first + m.MAX_BATCH], machine=args.machine,
                                                priority=args.priority, tier=args.tier)
                advance(len(tasks[first:first + m.MAX_BATCH]))
            except PegasusError as exc:
                if submitted:
                    _print_ids(args, submitted)
                done = f"{len(submitted)} (their ids above)" if submitted else "none"
                raise PegasusError(f"{done} of the {len(tasks)} tasks submitted; lines "
                                   f"{first + 1}-{min(first + m.MAX_BATCH, len(tasks))}: {exc}") from None
    _print_ids(args, submitted)
    return EXIT_OK


def _print_ids(args: argparse.Namespace, tasks: list[dict[str, Any]]) -> None:
    emit(args, tasks, "\n".join(t["task_id"] for t in tasks))


def task_command(asked: type[m.Request[View]], **extra: str) -> Callable[[argparse.Namespace], int]:
    """status, suspend, resume, cancel, approve, retry: the request ``asked`` of the task id (and the options
    ``extra`` names: field -> argument), the task's view out."""
    def command(args: argparse.Namespace) -> int:
        kwargs = {name: getattr(args, attr) for name, attr in extra.items()}
        task = ask(args, asked(task_id=args.task_id, **kwargs))
        emit(args, task, views.task_text(task))
        return EXIT_OK
    return command


def list_tasks(args: argparse.Namespace) -> int:
    page = ask(args, m.ListTasks(state=args.state, limit=args.limit, offset=args.offset, text=args.text,
                                 metadata=dict(args.meta or [])))
    emit(args, page, views.list_text(page))
    return EXIT_OK


def history(args: argparse.Namespace) -> int:
    record = ask(args, m.History(task_id=args.task_id))
    emit(args, record, views.history_text(record))
    return EXIT_OK
