"""``pegasus watch``: a live full-screen view of the tasks and the pools, drawn with Rich.

A page of tasks and the pools every ``--interval`` seconds, sooner on a transition; Ctrl-C
leaves the terminal as it was (exit 0).  Not on a terminal, one view is printed.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from actors import messages as m
from actors.cli import views
from actors.cli.base import EXIT_OK, count, duration, settings_of
from actors.client import Client

RECENT = 8  # transitions shown under the tables
STATE_STYLES = {"done": "green", "running": "cyan", "verifying": "cyan", "queued": "yellow", "blocked": "magenta",
                "failed": "red", "canceled": "dim", "draft": "yellow", "approved": "yellow"}


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    p = command("watch", watch, "a live full-screen view of tasks and pools (Ctrl-C ends it)")
    p.add_argument("--interval", type=duration, default=1.0, metavar="SECONDS",
                   help="how often the view is read again, at the latest (default 1; a transition redraws it sooner)")
    p.add_argument("--limit", type=count(1, m.MAX_PAGE), default=20, metavar="N",
                   help="newest tasks shown (default 20)")


def watch(args: argparse.Namespace) -> int:
    console = Console()
    with Client.connect(settings_of(args)) as client:
        if args.json or not console.is_terminal:
            view = {"tasks": client.list_page(limit=args.limit), "stats": client.stats()}
            if args.json:
                print(json.dumps(view, indent=2, default=str))
            else:
                console.print(render(view["tasks"], view["stats"], []))
            return EXIT_OK
        client.subscribe(None)
        recent: deque[m.TransitionNotice] = deque(maxlen=RECENT)
        try:
            with Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
                while True:
                    live.update(render(client.list_page(limit=args.limit), client.stats(), list(recent)), refresh=True)
                    _wait(client, recent, max(args.interval, 0.05))
        except KeyboardInterrupt:
            pass  # the way out: Live has restored the terminal
        client.unsubscribe()
    return EXIT_OK


def _wait(client: Client, recent: deque[m.TransitionNotice], interval: float) -> None:
    """Until ``interval`` has passed, or a transition came (then a moment more: a burst is drawn once)."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        got = [n for n in client.notices(left) if isinstance(n, m.TransitionNotice)]
        if got:
            recent.extendleft(got)
            deadline = min(deadline, time.monotonic() + 0.1)


def render(page: dict[str, Any], stats: dict[str, Any], recent: list[m.TransitionNotice]) -> Group:
    """The whole screen: a header line, the tasks, the pools, the latest transitions."""
    now = datetime.now(timezone.utc)
    header = Text.assemble(
        ("pegasus watch", "bold"), f"  {now:%H:%M:%S} UTC   tasks: {views.counts_text(stats.get('tasks') or {})}   "
        f"active {stats.get('active', 0)}/{stats.get('max_active_tasks', '?')}   queued {stats.get('queue_length', 0)}"
        "   (Ctrl-C to quit)")
    tasks = Table(title=f"tasks (newest {len(page['tasks'])} of {page['total']})", expand=True, title_justify="left")
    for column in ("task", "machine", "lifecycle", "state", "priority", "updated", "input"):
        tasks.add_column(column, no_wrap=column != "input", overflow="ellipsis", ratio=4 if column == "input" else 1)
    for task in page["tasks"]:
        state = task["lifecycle_state"]
        tasks.add_row(task["task_id"][:12], task["machine"], Text(state, style=STATE_STYLES.get(state, "")),
                      task["state"], str(task["priority"]), _age(task.get("updated_at"), now),
                      views.clean(task["input"])[:80])
    pools = Table(title="pools", expand=True, title_justify="left")
    for column in ("pool", "workers", "busy", "queued", "replaced"):
        pools.add_column(column)
    for name, pool in (stats.get("pools") or {}).items():
        pools.add_row(name, *(str(pool.get(figure, "-")) for figure in ("size", "busy", "queued", "replaced")))
    lines = [f"{n.timestamp[11:19]}  {n.task_id[:12]}  {n.machine:<10} {n.from_state} -> {n.to_state}  {n.event}"
             for n in recent]
    return Group(header, tasks, pools, Text("latest transitions", style="bold"), Text("\n".join(lines) or "-"))


def _age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return ""
    try:
        seconds = (now - datetime.fromisoformat(stamp)).total_seconds()
    except ValueError:
        return ""
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"

