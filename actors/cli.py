"""The ``pegasus`` commands that talk to an actor system (wired into pegasus.cli).

``run`` uses the running system (``pegasus start``) or starts an embedded one
for the one task and shuts it down afterwards.  Every other command attaches to
the running system and fails with a one-line reason when there is none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from actors import convention, messages as m
from actors.client import Client, resolved, spec_for
from actors.system import SystemNotRunningError, check_owner, stop_daemon
from pegasus import config
from pegasus.errors import PegasusError
from pegasus.idempotency import MAX_KEY_LENGTH
from pegasus.store.backup import backup_file
from pegasus.store.sqlite import DB_FILE

# `pegasus run`: 0 done (every step succeeded), 1 failed or canceled (or the command itself
# failed), 3 waiting for information (blocked), 4 failed or canceled with an effect in doubt
# (effects_unknown: check before running it again).  2 is argparse's usage error, 130 Ctrl-C.
EXIT_OK, EXIT_FAILURE, EXIT_WAITING, EXIT_EFFECTS_UNKNOWN = 0, 1, 3, 4


def _settings(args: argparse.Namespace) -> config.Settings:
    settings = config.load(args.config)
    if args.port is not None:
        settings = settings.with_overrides({"system": {"admin_port": args.port}})
    return settings


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text, flush=True)


def _describe(task: dict[str, Any]) -> str:
    lines = [f"task {task['task_id']}  ({task['machine']}, priority {task['priority']})",
             f"  lifecycle: {task['lifecycle_state']}    cognitive: {task['state']}",
             f"  input:     {task['input']}"]
    if task.get("question"):
        lines.append(f"  question:  {task['question']}")
    if task.get("result") is not None:
        lines.append(f"  result:    {task['result']}")
    if task.get("error"):
        lines.append(f"  error:     {task['error']} (exit_reason: {task.get('exit_reason')})")
    for step in task.get("effects_unknown") or []:  # started, outcome unknown: never repeated
        lines.append(f"  effect unknown: {step['tool']} (step {step['step_index']}, key {step['key']})")
    return "\n".join(lines)


def _notice_line(notice: m.TransitionNotice) -> str:
    stage = notice.detail.get("stage")
    extra = f"  [{stage}]" if stage else ""
    return f"{notice.timestamp[11:23]}  {notice.machine:<10} {notice.from_state:>10} -> {notice.to_state:<10} {notice.event}{extra}"


def cmd_run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    try:
        client = Client.connect(settings)
        started = False
    except SystemNotRunningError:
        client = Client.start(settings)
        started = True
    with client:
        task = client.submit(args.text, machine=args.machine, priority=args.priority, follow=True,
                             metadata={"workspace": os.getcwd()}, source="cli")
        if not args.json:
            print(f"task {task['task_id']} submitted ({task['machine']}"
                  f"{', embedded system' if started else ''})", flush=True)
        notices = []
        try:
            for notice in client.follow(task["task_id"], timeout=args.timeout, subscribe=False):
                notices.append(notice.__dict__)
                if not args.json:
                    print(_notice_line(notice), flush=True)
        except TimeoutError as exc:  # a one-line reason, not a traceback
            after = "the embedded system stops now" if started else f"it goes on: pegasus status {task['task_id']}"
            raise PegasusError(f"{exc}; {after}") from None
        final = client.get(task["task_id"])
    if args.json:
        print(json.dumps({"task": final, "transitions": notices}, indent=2, default=str))
    else:
        print(_describe(final))
        if final["lifecycle_state"] == "blocked" and started:
            print("  (the embedded system stops now; use `pegasus start` to keep tasks you can resume)")
    if final["lifecycle_state"] == "done":
        return EXIT_OK
    if final["lifecycle_state"] == "blocked":
        return EXIT_WAITING
    print(f"pegasus: task {final['lifecycle_state']}: {final.get('error') or final['lifecycle_state']}",
          file=sys.stderr)
    return EXIT_EFFECTS_UNKNOWN if final.get("effects_unknown") else EXIT_FAILURE


def cmd_start(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.leader or settings.convention.lead:
        client, pid = convention.start_leader(settings)
        client.close()
        spec = client.spec
        _print(args, {"pid": pid, "port": spec.admin_port, "state_dir": str(spec.state_dir), "leader": True,
                      "member": spec.member_name},
               f"pegasus started: convention leader {spec.member_name} (admin pid {pid}), state in {spec.state_dir}\n"
               f"join it from another machine: pegasus join {spec.member_name} --port PORT")
        return EXIT_OK
    spec = spec_for(resolved(settings))
    client, pid = Client.start_daemon(settings)
    client.close()
    _print(args, {"pid": pid, "port": spec.admin_port, "state_dir": str(spec.state_dir)},
           f"pegasus started: admin pid {pid} on {spec.bind}:{spec.admin_port}, state in {spec.state_dir}")
    return EXIT_OK


def cmd_join(args: argparse.Namespace) -> int:
    settings = _settings(args)
    capabilities = dict(convention.parse_capability(text) for text in args.capability or [])
    spec, pid = convention.join(settings, args.leader_address, capabilities, key_file=args.key_file)
    leader = "{}:{}".format(*spec.convention_leader or ("?", 0))
    _print(args, {"pid": pid, "port": spec.admin_port, "member": spec.member_name, "leader": leader,
                  "capabilities": spec.capabilities},
           f"pegasus joined: member {spec.member_name} (admin pid {pid}) of the convention led by {leader}, "
           f"offering {spec.capabilities}\nleave with: pegasus stop --port {spec.admin_port}")
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the system of this state directory, and only it: its processes are the lock's holders."""
    spec = spec_for(resolved(_settings(args)))
    check_owner(spec)
    stop_daemon(spec)
    _print(args, {"stopped": spec.admin_port}, f"pegasus stopped (port {spec.admin_port})")
    return EXIT_OK


def _with_client(args: argparse.Namespace, operation: str, *params: Any, **kwargs: Any) -> Any:
    with Client.connect(_settings(args)) as client:
        return getattr(client, operation)(*params, **kwargs)


def cmd_submit(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.file is None):
        raise PegasusError("give the task's text, or --file PATH with one task per line (not both)")
    if args.key is not None and not 0 < len(args.key) <= MAX_KEY_LENGTH - 8:  # room for --file's ':n'
        raise PegasusError(f"--key must be 1 to {MAX_KEY_LENGTH - 8} characters")
    if args.file is not None:
        return _submit_file(args)
    task = _with_client(args, "submit", args.text, machine=args.machine, priority=args.priority,
                        metadata={"workspace": os.getcwd()}, source="cli", key=args.key)
    if task.get("existing") and not args.json:
        print(f"pegasus: key {args.key!r} was used before: its task is {task['task_id']}", file=sys.stderr)
    _print(args, task, task["task_id"])
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
    with Client.connect(_settings(args)) as client:
        for first in range(0, len(tasks), m.MAX_BATCH):
            try:
                submitted += client.submit_many(tasks[first:first + m.MAX_BATCH], machine=args.machine,
                                                priority=args.priority)
            except PegasusError as exc:
                if submitted:
                    _print_ids(args, submitted)
                done = f"{len(submitted)} (their ids above)" if submitted else "none"
                raise PegasusError(f"{done} of the {len(tasks)} tasks submitted; lines "
                                   f"{first + 1}-{min(first + m.MAX_BATCH, len(tasks))}: {exc}") from None
    _print_ids(args, submitted)
    return EXIT_OK


def _print_ids(args: argparse.Namespace, tasks: list[dict[str, Any]]) -> None:
    _print(args, tasks, "\n".join(t["task_id"] for t in tasks))


def _task_command(operation: str, **extra: str) -> Any:
    def command(args: argparse.Namespace) -> int:
        kwargs = {name: getattr(args, attr) for name, attr in extra.items()}
        task = _with_client(args, operation, args.task_id, **kwargs)
        _print(args, task, _describe(task))
        return EXIT_OK
    return command


def cmd_list(args: argparse.Namespace) -> int:
    rows = _with_client(args, "list", args.state)
    text = "\n".join(f"{r['task_id']}  {r['lifecycle_state']:<9} {r['state']:<10} p{r['priority']:<3} {r['input'][:50]}"
                     for r in rows) or "(no tasks)"
    _print(args, rows, text)
    return EXIT_OK


def _when(timestamp: str) -> datetime:
    """An ISO timestamp ('...Z' or '...+00:00', with or without microseconds) as a datetime."""
    return datetime.fromisoformat(timestamp)


def cmd_history(args: argparse.Namespace) -> int:
    history = _with_client(args, "history", args.task_id)
    lines = [(_when(h["timestamp"]), f"{h['timestamp'][11:23]}  lifecycle  {h['from_state']:>10} -> {h['to_state']:<10} {h['trigger_event_type']}")
             for h in history["lifecycle"]]
    lines += [(_when(h["timestamp"]), f"{h['timestamp'][11:23]}  run {h['run']}      {h['from_state']:>10} -> {h['to_state']:<10} {h['event']}")
              for h in history["cognitive"]]
    # Order by time, not by the text: lines with the same displayed millisecond were sorted
    # alphabetically (e.g. 'queued -> running' before 'approved -> queued').
    _print(args, history, "\n".join(line for _, line in sorted(lines, key=lambda pair: pair[0])))
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    stats = _with_client(args, "stats")
    pools = "  ".join(f"{name}: {p['busy']}/{p['size']} busy, {p['queued']} queued" for name, p in stats["pools"].items())
    text = (f"active {stats['active']}/{stats['max_active_tasks']}, queue {stats['queue_length']}\n"
            f"tasks: {stats['tasks']}\npools: {pools}")
    if "members" in stats:
        text += "\n" + convention.describe_members(stats)
    if not stats["store"]["writable"]:
        text += f"\nstore: takes no writes: {stats['store']['error']}"
    _print(args, stats, text)
    return EXIT_OK


def cmd_backup(args: argparse.Namespace) -> int:
    """Copy the database with SQLite's online backup API: from the running system, or from
    the file when none runs."""
    settings = resolved(_settings(args))
    target = os.path.abspath(args.path)
    try:
        client = Client.connect(settings)
    except SystemNotRunningError:
        report = backup_file(settings.state_dir() / DB_FILE, target, overwrite=args.force)
    else:
        with client:
            report = client.backup(target, overwrite=args.force)
    _print(args, report, f"backup written: {report['path']} ({report['tasks']} tasks, {report['bytes']} bytes)")
    return EXIT_OK


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    system = argparse.ArgumentParser(add_help=False, parents=[common])
    system.add_argument("--config", help="configuration file (default: $PEGASUS_CONFIG or <state dir>/pegasus.toml)")
    system.add_argument("--port", type=int, help="admin port of the system (default from config)")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[system], help=help_text)
        parser.set_defaults(handler=handler)
        return parser

    def task_options(parser: argparse.ArgumentParser, text_nargs: str | None = None) -> None:
        parser.add_argument("text", nargs=text_nargs, help="what the task should do")
        parser.add_argument("--machine", choices=["classic", "reason_act"], help="cognitive machine")
        parser.add_argument("--priority", type=int, default=5, help="lower runs first (default 5)")

    task_options(p := command("run", cmd_run, "run one task, showing each transition live"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the task")
    p.epilog = ("exit status: 0 done (every step it rests on succeeded), 1 failed or canceled (or the command "
                "failed), 3 waiting for information (pegasus resume), 4 failed or canceled with an effect "
                "unknown (see effects_unknown before running it again), 130 interrupted")
    start = command("start", cmd_start, "start a system in the background")
    start.add_argument("--leader", action="store_true",
                       help="lead a convention: other machines join with `pegasus join` (docs/convention.md)")
    join = command("join", cmd_join, "add this machine to a convention: a background member admin")
    join.add_argument("leader_address", nargs="?", metavar="HOST:PORT",
                      help="the leader's address and admin port (default: [convention] leader)")
    join.add_argument("--key-file", metavar="PATH",
                      help="the leader's system key (a copy of <leader state dir>/system.key); kept in this "
                           "machine's state directory, so later joins need it only when it changes")
    join.add_argument("--capability", action="append", metavar="NAME=VALUE",
                      help="advertise a capability, e.g. pegasus.llm_workers=4 or pegasus.tool_workers=0 "
                           "(worker counts default to this machine's [pools]); repeatable")
    command("stop", cmd_stop, "stop the background system")
    task_options(submit := command("submit", cmd_submit, "submit a task (or a file of them) and print the ids"), "?")
    submit.add_argument("--file", metavar="PATH", help="one task per line ('-': standard input), "
                        f"sent {m.MAX_BATCH} to a request, each request all or none")
    submit.add_argument("--key", help="idempotency key: a key used before answers the task it created "
                        "(with --file, line task n gets KEY:n)")
    backup = command("backup", cmd_backup, "copy the database (consistent while tasks run)")
    backup.add_argument("path", help="where to write the copy (mode 0600)")
    backup.add_argument("--force", action="store_true", help="replace the file if it exists")
    for name, help_text, extra in (
        ("status", "show a task", {}), ("suspend", "suspend a running task", {}),
        ("resume", "resume a suspended task", {"message": "message"}), ("cancel", "cancel a task", {}),
        ("approve", "approve a draft task (manual approval)", {}), ("retry", "retry a failed task", {}),
    ):
        operation = "get" if name == "status" else name
        parser = command(name, _task_command(operation, **extra), help_text)
        parser.add_argument("task_id")
        if name == "resume":
            parser.add_argument("--message", help="more information for the task")
    command("list", cmd_list, "list tasks").add_argument("--state", help="only tasks in this state")
    command("history", cmd_history, "a task's transitions").add_argument("task_id")
    command("stats", cmd_stats, "queue, active tasks and pools")
