"""The CLI is served from the one declaration of each request (pegasus/requests/): a command that asks one
request names its class, which the supervisor answers by a row of its own, and asks exactly that class.
No request is looked up by a name string, none chosen by a field's value.  No actor system."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

from actors.cli import schedules, tasks
from actors.cli.main import build_parser
from actors.supervisor.carrier import ROWS
from pegasus import requests as r

ONE_REQUEST = {
    ("status",): r.Get, ("suspend",): r.Suspend, ("resume",): r.Resume, ("cancel",): r.Cancel,
    ("approve",): r.Approve, ("retry",): r.Retry, ("schedule", "pause"): r.SchedulePause,
    ("schedule", "resume"): r.ScheduleResume, ("schedule", "trigger"): r.ScheduleTrigger,
    ("schedule", "remove"): r.ScheduleRemove,
}


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command line's words and its handler, sub-commands included."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser.get_default("handler")
    for sub in subs:
        for name, child in sub.choices.items():
            yield from commands(child, (*path, name))


def test_every_command_of_one_request_names_its_declared_class_which_has_a_supervisor_row_of_its_own() -> None:
    named = {path: handler.request for path, handler in commands(build_parser()) if hasattr(handler, "request")}
    assert named == ONE_REQUEST
    assert all(isinstance(request, type) and issubclass(request, r.Request) for request in named.values())
    rows = [ROWS[request] for request in named.values()]
    assert len(set(rows)) == len(rows)  # each answered by its own row: no row picks the operation from a field


class Asked(Exception):
    """What a command asked, instead of an answer."""


@pytest.mark.parametrize("path", sorted(ONE_REQUEST), ids=" ".join)
def test_each_such_command_asks_its_class_of_the_name_given(path: tuple[str, ...],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def ask(args: argparse.Namespace, request: r.Request[Any]) -> Any:
        raise Asked(request)
    monkeypatch.setattr(tasks, "ask", ask)
    monkeypatch.setattr(schedules, "ask", ask)
    args = build_parser().parse_args([*path, "abc"])
    with pytest.raises(Asked) as asked:
        args.handler(args)
    [request] = asked.value.args
    assert type(request) is ONE_REQUEST[path]
    assert getattr(request, "task_id", None) == "abc" or getattr(request, "name", None) == "abc"
