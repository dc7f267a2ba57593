"""The parser -- every command and every flag, in one place -- and ``main``, which runs one.

Each command's handler takes the parsed arguments and returns the exit status;
``main`` turns an error into its exit status and one line on stderr
(``pegasus: <reason>``), or with ``--json`` into ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import shtab

import pegasus
from actors import messages as m
from actors.cli import dashboard, local, memory, progress, schedules, system, talk, tasks, tokens, watch, webhooks
from actors.cli.tree import tree
from actors.cli.base import (
    EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, count, duration, error, error_type,
)
from pegasus.errors import PegasusError
from pegasus.metadata import INT64_MAX
from pegasus.task import machines

RUN_EXIT_STATUS = ("exit status: 0 done (every step it rests on succeeded), 1 failed or canceled (or the command "
                   "failed), 3 waiting for information (pegasus resume), 4 failed or canceled with an effect "
                   "unknown (see effects_unknown before running it again), 130 interrupted")
COMPLETION_HELP = ("bash: pegasus completion bash > ~/.local/share/bash-completion/completions/pegasus; "
                   "zsh: pegasus completion zsh > ~/.zfunc/_pegasus, with fpath=(~/.zfunc $fpath) before compinit "
                   "in ~/.zshrc. Then open a new shell.")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised (main prints it, as text or JSON) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage(), self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pegasus", description="Run LLM agent tasks as state machines on actors.",
                     epilog="Every command takes -h, and all but completion take --json. Exit status: 0 ok, "
                            "1 failed, 2 usage error (run has more: pegasus run -h).")
    parser.add_argument("--version", action="version", version=f"pegasus {pegasus.__version__}")
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output (errors too, on stderr)")
    configured = _Parser(add_help=False, parents=[common])
    configured.add_argument("--config", metavar="PATH", help="configuration file (default: $PEGASUS_CONFIG or "
                            "<state dir>/pegasus.toml)").complete = shtab.FILE  # type: ignore[attr-defined]
    on_system = _Parser(add_help=False, parents=[configured])
    on_system.add_argument("--port", type=count(1, 65535), metavar="PORT",
                           help="admin port of the system (default from config)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str, parent: _Parser = on_system,
                **kwargs: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[parent], help=help_text, description=help_text, **kwargs)
        p.set_defaults(handler=handler)
        return p

    def task_options(p: argparse.ArgumentParser, text_nargs: str | None = None) -> None:
        p.add_argument("text", nargs=text_nargs, metavar="TEXT", help="what the task should do")
        p.add_argument("--machine", choices=machines.COGNITIVE_MACHINES, help="cognitive machine (default from config)")
        p.add_argument("--priority", type=count(0, m.MAX_PRIORITY), default=5, metavar="N",
                       help="lower runs first (default 5)")

    task_options(p := command("run", tasks.run, "run one task, showing each transition live", epilog=RUN_EXIT_STATUS))
    p.add_argument("--timeout", type=duration, default=300.0, metavar="SECONDS", help="how long to wait (default 300)")
    task_options(p := command("submit", tasks.submit, "submit a task (or a file of them) and print the ids"), "?")
    p.add_argument("--file", metavar="PATH", help=f"one task per line ('-': standard input), sent {m.MAX_BATCH} "
                   "to a request, each request all or none").complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--key", help="idempotency key: a key used before answers the task it created "
                   "(with --file, the task of line n gets KEY:n)")
    for name, handler, help_text in (
        ("status", tasks.task_command(m.Get), "show a task"),
        ("history", tasks.history, "a task's transitions"),
        ("suspend", tasks.task_command(m.Suspend), "suspend a running task"),
        ("resume", tasks.task_command(m.Resume, message="message"), "resume a suspended or blocked task"),
        ("cancel", tasks.task_command(m.Cancel), "cancel a task"),
        ("approve", tasks.task_command(m.Approve), "approve a draft task (manual approval)"),
        ("retry", tasks.task_command(m.Retry), "retry a failed task"),
    ):
        p = command(name, handler, help_text)
        p.add_argument("task_id", metavar="TASK_ID")
        if name == "resume":
            p.add_argument("--message", metavar="TEXT", help="the information the task asked for")
    talk.add_commands(command)
    watch.add_command(command)
    progress.add_command(command)
    p = command("tree", tree, "show a task and its sub-tasks, each with its states")
    p.add_argument("task_id", metavar="TASK_ID")
    p = command("list", tasks.list_tasks, "list tasks, newest first, a page at a time")
    p.add_argument("--state", choices=m.LIST_STATES, metavar="STATE",
                   help=f"only tasks in this lifecycle or cognitive state: {', '.join(m.LIST_STATES)}")
    p.add_argument("--limit", type=count(1, m.MAX_PAGE), default=50, metavar="N", help="tasks on the page (default 50)")
    p.add_argument("--offset", type=count(0, INT64_MAX), default=0, metavar="N",
                   help="newest tasks to skip (default 0)")

    p = command("start", system.start, "start a system in the background")
    p.add_argument("--leader", action="store_true",
                   help="lead a convention: other machines join with `pegasus join` (docs/convention.md)")
    p.add_argument("--http", type=count(1, 65535), metavar="PORT",
                   help="also serve the HTTP API on this port ([http] enabled; docs/http.md)")
    command("stop", system.stop, "stop the background system")
    p = command("join", system.join, "add this machine to a convention: a background member admin")
    p.add_argument("leader_address", nargs="?", metavar="HOST:PORT",
                   help="the leader's address and admin port (default: [convention] leader)")
    p.add_argument("--key-file", metavar="PATH", help="the leader's system key (a copy of <leader state dir>/"
                   "system.key); kept in this machine's state directory, so later joins need it only when it "
                   "changes").complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--capability", action="append", metavar="NAME=VALUE",
                   help="advertise a capability, e.g. pegasus.llm_workers=4 or pegasus.tool_workers=0 "
                        "(worker counts default to this machine's [pools]); repeatable")
    command("stats", system.stats, "tasks, queue, pools and convention members")
    p = command("backup", system.backup, "copy the database (consistent while tasks run)")
    p.add_argument("path", metavar="PATH", help="where to write the copy (mode 0600)"
                   ).complete = shtab.FILE  # type: ignore[attr-defined]
    p.add_argument("--force", action="store_true", help="replace the file if it exists")
    p = command("restore", system.restore, "put a backup in place of the database (the system stopped)")
    p.add_argument("path", metavar="PATH", help="the backup (pegasus backup wrote it)"
                   ).complete = shtab.FILE  # type: ignore[attr-defined]

    tokens.add_commands(sub, on_system)
    dashboard.add_command(sub, on_system)
    schedules.register(sub, on_system)
    webhooks.register(sub, on_system)
    memory.add_commands(sub, on_system, configured)

    p = command("machines", local.machines, "show a state machine's states and transitions", common)
    p.add_argument("name", nargs="?", choices=machines.names(), help="machine to show (default: list them)")
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid state diagram")
    command("tools", local.tools, "list every tool: description, arguments, effect class", configured)
    p = sub.add_parser("completion", help="print the shell completion script (bash or zsh)",
                       description="Print the completion script of a shell. " + COMPLETION_HELP)
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(handler=completion)
    return parser


def completion(args: argparse.Namespace) -> int:
    # shtab writes a static script from the parser: every command, flag and choice, no Python run per Tab.
    print(shtab.complete(build_parser(), shell=args.shell))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv  # until the arguments are parsed: a usage error is JSON too
    try:
        args = build_parser().parse_args(argv)
        as_json = getattr(args, "json", False)
        status: int = args.handler(args)
        return status
    except UsageError as exc:
        if as_json:
            error(str(exc), "UsageError", as_json=True)
        else:  # as argparse says it
            sys.stderr.write(f"{exc.usage}{exc.prog}: error: {exc}\n")
        return EXIT_USAGE
    except PegasusError as exc:
        error(str(exc), error_type(exc), as_json=as_json)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        error("interrupted", "Interrupted", as_json=as_json)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``pegasus list | head``): nothing more to say, and
        # stdout must not be flushed again on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
