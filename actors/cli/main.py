"""The parser -- every command and every flag, in one place -- and ``main``, which runs one.

Each command's handler takes the parsed arguments and returns the exit status;
``main`` turns an error into its exit status and one line on stderr
(``pegasus: <reason>``), or with ``--json`` into ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, get_args

import pegasus
from actors.cli.base import (
    EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Handler, UsageError, asking, count, duration, error,
    error_type,
)
from pegasus.errors import PegasusError
from pegasus.metadata import INT64_MAX
from pegasus.task.names import CognitiveMachineName

if TYPE_CHECKING:  # imported by the commands that ask them
    from pegasus.requests import Request, View

RUN_EXIT_STATUS = ("exit status: 0 done (every step it rests on succeeded), 1 failed or canceled (or the command "
                   "failed), 3 waiting for information (pegasus resume), 4 failed or canceled with an effect "
                   "unknown (see effects_unknown before running it again), 130 interrupted")
COMPLETION_HELP = ("bash: pegasus completion bash > ~/.local/share/bash-completion/completions/pegasus; "
                   "zsh: pegasus completion zsh > ~/.zfunc/_pegasus, with fpath=(~/.zfunc $fpath) before compinit "
                   "in ~/.zshrc. Then open a new shell.")
COGNITIVE_MACHINES = get_args(CognitiveMachineName)
FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}  # shtab.FILE, without importing shtab


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised (main prints it, as text or JSON) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage(), self.prog)


def later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The handler ``name`` of ``actors.cli.<module>``, imported when the command runs: a command costs
    the imports of its own module only (``--version``, ``status``, ``list`` in under 0.3 s)."""
    def handler(args: argparse.Namespace) -> int:
        run = getattr(_imported(f"actors.cli.{module}"), name)
        status: int = run(args)
        return status
    handler.__name__ = name
    return handler


def _imported(module: str) -> Any:
    """``module``, imported with the cyclic garbage collector paused: importing allocates only what stays (the
    collector's passes over it cost a command ~5% of its time); it runs again for the command itself."""
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.enable()


def task_request(asked: type[Request[View]], **extra: str) -> Handler:
    """status, suspend, ...: ``actors.cli.tasks.task_command`` of the request ``asked``, imported when it runs."""
    def handler(args: argparse.Namespace) -> int:
        status: int = _imported("actors.cli.tasks").task_command(asked, **extra)(args)
        return status
    return asking(asked, handler)


@dataclass
class _Commands:
    """What each group of commands is declared on: the subparsers and the shared parents."""

    sub: Any
    common: _Parser
    configured: _Parser
    on_system: _Parser

    def command(self, name: str, handler: Any, help_text: str, parent: _Parser | None = None,
                **kwargs: Any) -> argparse.ArgumentParser:
        p = self.sub.add_parser(name, parents=[parent or self.on_system], help=help_text, description=help_text,
                                **kwargs)
        p.set_defaults(handler=handler)
        return p


def _task_commands(c: _Commands) -> None:
    from pegasus import requests as r

    def task_options(p: argparse.ArgumentParser, text_nargs: str | None = None) -> None:
        p.add_argument("text", nargs=text_nargs, metavar="TEXT", help="what the task should do")
        p.add_argument("--machine", choices=COGNITIVE_MACHINES, help="cognitive machine (default from config)")
        p.add_argument("--tier", metavar="NAME", help='model tier of every model stage: "default" or a name of '
                       "[llm.tiers] (default: each stage's, [llm.stages])")
        p.add_argument("--priority", type=count(0, r.MAX_PRIORITY), default=5, metavar="N",
                       help="lower runs first (default 5)")

    task_options(p := c.command("run", later("tasks", "run"), "run one task, showing each transition live",
                                epilog=RUN_EXIT_STATUS))
    p.add_argument("--timeout", type=duration, default=300.0, metavar="SECONDS", help="how long to wait (default 300)")
    task_options(p := c.command("submit", later("tasks", "submit"), "submit a task (or a file of them) and print the ids"), "?")
    p.add_argument("--file", metavar="PATH", help=f"one task per line ('-': standard input), sent {r.MAX_BATCH} "
                   "to a request, each request all or none").complete = FILE  # type: ignore[attr-defined]
    p.add_argument("--key", help="idempotency key: a key used before answers the task it created "
                   "(with --file, the task of line n gets KEY:n)")


def _task_actions(c: _Commands) -> None:
    from pegasus.requests import tasks as r
    for name, handler, help_text in (
        ("status", task_request(r.Get), "show a task"),
        ("history", later("tasks", "history"), "a task's transitions"),
        ("suspend", task_request(r.Suspend), "suspend a running task"),
        ("resume", task_request(r.Resume, message="message"), "resume a suspended or blocked task"),
        ("cancel", task_request(r.Cancel), "cancel a task"),
        ("approve", task_request(r.Approve), "approve a draft task (manual approval)"),
        ("retry", task_request(r.Retry), "retry a failed task"),
    ):
        p = c.command(name, handler, help_text)
        p.add_argument("task_id", metavar="TASK_ID")
        if name == "resume":
            p.add_argument("--message", metavar="TEXT", help="the information the task asked for")


def _tree(c: _Commands) -> None:
    p = c.command("tree", later("tree", "tree"), "show a task and its sub-tasks, each with its states")
    p.add_argument("task_id", metavar="TASK_ID")


def _list(c: _Commands) -> None:
    from pegasus import requests as r
    p = c.command("list", later("tasks", "list_tasks"), "list tasks, newest first, a page at a time")
    p.add_argument("--state", choices=r.LIST_STATES, metavar="STATE",
                   help=f"only tasks in this lifecycle or cognitive state: {', '.join(r.LIST_STATES)}")
    p.add_argument("--limit", type=count(1, r.MAX_PAGE), default=50, metavar="N", help="tasks on the page (default 50)")
    p.add_argument("--offset", type=count(0, INT64_MAX), default=0, metavar="N",
                   help="newest tasks to skip (default 0)")
    p.add_argument("--text", metavar="WORDS", help="only tasks with every one of these words in their input or result")
    p.add_argument("--meta", action="append", type=meta_pair, metavar="KEY=VALUE",
                   help="only tasks whose metadata has this value (a string, number or boolean); repeatable")


def meta_pair(text: str) -> tuple[str, str]:
    """An argparse type: ``key=value`` (a metadata filter of ``list --meta``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not KEY=VALUE")
    return key, value


def _system(c: _Commands) -> None:
    p = c.command("start", later("system", "start"), "start a system in the background")
    p.add_argument("--leader", action="store_true",
                   help="lead a convention: other machines join with `pegasus join` (docs/convention.md)")
    p.add_argument("--http", type=count(1, 65535), metavar="PORT",
                   help="also serve the HTTP API on this port ([http] enabled; docs/http.md)")
    c.command("stop", later("system", "stop"), "stop the background system")
    p = c.command("join", later("system", "join"), "add this machine to a convention: a background member admin")
    p.add_argument("leader_address", nargs="?", metavar="HOST:PORT",
                   help="the leader's address and admin port (default: [convention] leader)")
    p.add_argument("--key-file", metavar="PATH", help="the leader's system key (a copy of <leader state dir>/"
                   "system.key); kept in this machine's state directory, so later joins need it only when it "
                   "changes").complete = FILE  # type: ignore[attr-defined]
    p.add_argument("--capability", action="append", metavar="NAME=VALUE",
                   help="advertise a capability, e.g. pegasus.llm_workers=4 or pegasus.tool_workers=0 "
                        "(worker counts default to this machine's [pools]); repeatable")
    c.command("stats", later("system", "stats"), "tasks, queue, pools and convention members")
    p = c.command("backup", later("system", "backup"), "copy the database (consistent while tasks run)")
    p.add_argument("path", metavar="PATH", help="where to write the copy (mode 0600)"
                   ).complete = FILE  # type: ignore[attr-defined]
    p.add_argument("--force", action="store_true", help="replace the file if it exists")
    p = c.command("restore", later("system", "restore"), "put a backup in place of the database (the system stopped)")
    p.add_argument("path", metavar="PATH", help="the backup (pegasus backup wrote it)"
                   ).complete = FILE  # type: ignore[attr-defined]


def _machines(c: _Commands) -> None:
    from pegasus.task import machines
    p = c.command("machines", later("local", "machines"), "show a state machine's states and transitions", c.common)
    p.add_argument("name", nargs="?", choices=machines.names(), help="machine to show (default: list them)")
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid state diagram")


def _tools(c: _Commands) -> None:
    c.command("tools", later("local", "tools"), "list every tool: description, arguments, effect class", c.configured)


def _module(name: str, registrar: str, *parents: str) -> Callable[[_Commands], None]:
    """A group that ``actors.cli.<name>.<registrar>`` declares (on ``command``, or on the subparsers and the
    parents named)."""
    def register(c: _Commands) -> None:
        add = getattr(importlib.import_module(f"actors.cli.{name}"), registrar)
        add(c.command) if not parents else add(c.sub, *(getattr(c, parent) for parent in parents))
    return register


# Each group of commands and the command names it declares: a command line builds its own group only.
GROUPS: list[tuple[tuple[str, ...], Callable[[_Commands], None]]] = [
    (("run", "submit"), _task_commands),
    (("status", "history", "suspend", "resume", "cancel", "approve", "retry"), _task_actions),
    (("message",), _module("talk", "add_commands")),
    (("watch",), _module("watch", "add_command")),
    (("wait",), _module("progress", "add_command")),
    (("tree",), _tree),
    (("list",), _list),
    (("logs", "delete", "purge"), _module("ops", "add_commands")),
    (("start", "stop", "join", "stats", "backup", "restore"), _system),
    (("token",), _module("tokens", "add_commands", "on_system")),
    (("dashboard",), _module("dashboard", "add_command", "on_system")),
    (("schedule",), _module("schedules", "register", "on_system")),
    (("webhook",), _module("webhooks", "register", "on_system")),
    (("memory", "identity"), _module("memory", "add_commands", "on_system", "configured")),
    (("machines",), _machines),
    (("tools",), _tools),
]


def _wanted(argv: Sequence[str] | None) -> set[str] | None:
    """The command ``argv`` names, alone (None: every command, for help, completion and a name not known).
    ``--version`` alone, or no command, builds none: argparse answers those from the top level."""
    if argv is None:
        return None
    words = [word for word in argv if not word.startswith("-")]
    if not words:
        return None if {"-h", "--help"} & set(argv) else set()
    known = {name for names, _ in GROUPS for name in names}
    return {words[0]} if words[0] in known else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given ``argv``, of the command it names only (the others' modules are
    not imported)."""
    parser = _Parser(prog="pegasus", description="Run LLM agent tasks as state machines on actors.",
                     epilog="Every command takes -h, and all but completion take --json. Exit status: 0 ok, "
                            "1 failed, 2 usage error (run has more: pegasus run -h).")
    parser.add_argument("--version", action="version", version=f"pegasus {pegasus.__version__}")
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output (errors too, on stderr)")
    configured = _Parser(add_help=False, parents=[common])
    configured.add_argument("--config", metavar="PATH", help="configuration file (default: $PEGASUS_CONFIG or "
                            "<state dir>/pegasus.toml)").complete = FILE  # type: ignore[attr-defined]
    on_system = _Parser(add_help=False, parents=[configured])
    on_system.add_argument("--port", type=count(1, 65535), metavar="PORT",
                           help="admin port of the system (default from config)")
    commands = _Commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"),
                         common, configured, on_system)
    wanted = _wanted(argv)
    for names, register in GROUPS:
        if wanted is None or wanted & set(names):
            register(commands)
    if wanted is None:
        p = commands.sub.add_parser("completion", help="print the shell completion script (bash or zsh)",
                                    description="Print the completion script of a shell. " + COMPLETION_HELP)
        p.add_argument("shell", choices=("bash", "zsh"))
        p.set_defaults(handler=completion)
    return parser


def _exit_now(status: int) -> None:
    """End this process at once: its output flushed and its log handlers closed first, nothing else run."""
    sys.stdout.flush()
    sys.stderr.flush()
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    os._exit(status)


def completion(args: argparse.Namespace) -> int:
    # shtab writes a static script from the parser: every command, flag and choice, no Python run per Tab.
    import shtab
    print(shtab.complete(build_parser(), shell=args.shell))
    return EXIT_OK


def _lean() -> None:
    """pydantic's plugins off, as in a system's processes, and ``importlib.metadata`` a stand-in until read: with
    the first model (the parser's requests) pydantic's plugin loader imports it (with email and csv) and scans
    every installed distribution for plugins, which no command uses."""
    from actors.runtime.deferred import defer_metadata  # noqa: PLC0415 - a whole process only, not a caller's

    defer_metadata()


# Reads that start nothing: run as a process of their own (``argv`` None), they end with os._exit once their output
# is flushed, sparing the interpreter's teardown of every module they imported (~50 ms).
QUICK_EXIT = frozenset({"status", "list", "history", "tree", "logs", "stats"})


def main(argv: Sequence[str] | None = None) -> int:
    whole_process = argv is None
    if whole_process:  # before the parser builds the first pydantic model (see _lean)
        _lean()
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv  # until the arguments are parsed: a usage error is JSON too
    try:
        args = build_parser(argv).parse_args(argv)
        as_json = getattr(args, "json", False)
        quick = whole_process and args.command in QUICK_EXIT
        status: int = args.handler(args)
        if quick:
            _exit_now(status)
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
