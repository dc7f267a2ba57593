"""``pegasus schedule add | list | pause | resume | trigger | remove``: tasks fired on a cron or an interval."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from actors import messages as m
from actors.cli.base import EXIT_OK, ask, asking, emit
from actors.cli.views import clean
from pegasus.requests import View
from pegasus.triggers.schedules import DEFAULT_CATCHUP_S, Overlap
from pegasus.task import machines

OVERLAP_HELP = ("while the previous task still runs: skip the slot (default), buffer_one (start it when the "
                "previous ends; at most one waits), allow_all, or cancel_other (cancel the previous)")


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """The ``schedule`` command and its actions, under the main parser's ``sub``."""
    p = sub.add_parser("schedule", help="tasks fired on a cron expression or an interval",
                       description="Schedules: each slot fires a task (source SCHEDULE_FIRED) at most once, also "
                                   "across crashes; docs/schedules.md")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", parents=[parent], help="add a schedule", description="Add a schedule.")
    add.add_argument("name", metavar="NAME")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="a cron expression (5 fields; in --tz), e.g. '0 9 * * 1-5'")
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 1h30m, 2d (counted from the epoch)")
    add.add_argument("--text", required=True, metavar="TEXT", help="what each fired task should do")
    add.add_argument("--tz", default="UTC", metavar="ZONE", help="the cron expression's time zone (default UTC)")
    add.add_argument("--machine", choices=machines.COGNITIVE_MACHINES, help="cognitive machine (default from config)")
    add.add_argument("--priority", type=int, default=5, metavar="N", help="lower runs first (default 5)")
    add.add_argument("--overlap", choices=[o.value for o in Overlap], default=Overlap.SKIP.value, help=OVERLAP_HELP)
    add.add_argument("--catchup", metavar="DURATION", default=f"{DEFAULT_CATCHUP_S:g}s",
                     help=f"after downtime, missed slots this recent fire; older ones are skipped and counted "
                          f"(default {DEFAULT_CATCHUP_S:g}s)")
    add.set_defaults(handler=add_schedule)
    actions.add_parser("list", parents=[parent], help="list the schedules").set_defaults(handler=list_schedules)
    for verb, (asked, help_text, said) in CONTROLS.items():
        q = actions.add_parser(verb, parents=[parent], help=help_text, description=help_text)
        q.add_argument("name", metavar="NAME")
        q.set_defaults(handler=control(asked, said))


def add_schedule(args: argparse.Namespace) -> int:
    view = ask(args, m.ScheduleAdd.of(args.name, text=args.text, cron=args.cron, every=args.every, tz=args.tz,
                                      machine=args.machine, priority=args.priority, overlap=args.overlap,
                                      catchup=args.catchup))
    emit(args, view, f"schedule {view['name']} added; next: {view['next_time']}")
    return EXIT_OK


def list_schedules(args: argparse.Namespace) -> int:
    views = ask(args, m.ScheduleList())
    emit(args, views, schedules_text(views))
    return EXIT_OK


def _paused_or_resumed(view: dict[str, Any]) -> str:
    return f"schedule {view['name']} " + ("paused" if view["paused"] else f"resumed; next: {view['next_time']}")


# Each verb of a schedule: the request it asks, its help, and the line its answer prints.
CONTROLS: dict[str, tuple[type[m.Request[View]], str, Callable[[dict[str, Any]], str]]] = {
    "pause": (m.SchedulePause, "pause a schedule (its slots do not fire)", _paused_or_resumed),
    "resume": (m.ScheduleResume, "resume a paused schedule (what passed meanwhile does not fire)", _paused_or_resumed),
    "trigger": (m.ScheduleTrigger, "fire a schedule's task now",
                lambda view: f"schedule {view['name']} fired task {view['task']['task_id']}"),
    "remove": (m.ScheduleRemove, "remove a schedule", lambda view: f"schedule {view['name']} removed"),
}


def control(asked: type[m.Request[View]], said: Callable[[dict[str, Any]], str]) -> Callable[[argparse.Namespace], int]:
    """The handler of a verb: its request of the schedule named, its line out."""
    def handler(args: argparse.Namespace) -> int:
        view = ask(args, asked(name=args.name))
        emit(args, view, said(view))
        return EXIT_OK
    return asking(asked, handler)


def when_text(view: dict[str, Any]) -> str:
    if view["cron"] is not None:
        return f"cron {view['cron']} {view['tz']}"
    return f"every {view['every_s']:g}s"


def schedules_text(views: list[dict[str, Any]]) -> str:
    if not views:
        return "no schedules (add one: pegasus schedule add NAME --every 1h --text TEXT)"
    lines = [f"{'NAME':<20} {'WHEN':<28} {'NEXT':<26} {'OVERLAP':<13} {'FIRED':>6} {'SKIPPED':>7}  TEXT"]
    for v in views:
        if v.get("quarantined"):
            lines.append(f"{clean(v['name']):<20} QUARANTINED: {clean(v['quarantined'])}")
            continue
        nxt = "paused" if v["paused"] else v["next_time"]
        lines.append(f"{clean(v['name']):<20} {clean(when_text(v)):<28} {nxt:<26} {v['overlap']:<13} "
                     f"{v['fired']:>6} {v['skipped']:>7}  {clean(v['text'])[:60]}")
    return "\n".join(lines)
