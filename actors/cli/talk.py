"""Talking to a task while it works: ``pegasus message ID TEXT``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from actors import messages as m
from actors.cli import views
from actors.cli.base import EXIT_OK, ask, emit

MESSAGE_HELP = ("add a message to a task's conversation: a running task suspends after its current stage and "
                "re-thinks with it, a suspended one resumes with it, a queued one starts with it")


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    p = command("message", message, MESSAGE_HELP)
    p.add_argument("task_id", metavar="TASK_ID")
    p.add_argument("text", metavar="TEXT", help="what to tell the task")


def message(args: argparse.Namespace) -> int:
    task = ask(args, m.SendMessage(task_id=args.task_id, text=args.text))
    sent = task["message"]
    emit(args, task, f"message {sent['number']} to task {task['task_id']}: taken {sent['delivery']}\n"
                     + views.task_text(task))
    return EXIT_OK
