"""The ``pegasus`` command line.

Every command takes ``--json``; on failure it prints one line ``pegasus: <reason>``
to stderr and exits non-zero.  Commands that talk to a running system live in
``actors.cli`` (they need Thespian).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from actors import cli as runtime_cli
from pegasus import config
from pegasus.errors import PegasusError
from pegasus.task import machines, render
from pegasus.tools.builtin import BUILTIN_TOOLS
from pegasus.tools.plugins import registry_for

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def cmd_machines(args: argparse.Namespace) -> int:
    if args.name is None:
        rows = [render.describe(m) for m in machines.MACHINES.values()]
        text = "\n".join(f"{r['name']:<11} {len(r['states']):>2} states  {r['description']}" for r in rows)
        _emit(args, rows, text)
        return EXIT_OK
    machine = machines.get(args.name)
    if args.mermaid:
        print(render.mermaid(machine))
    else:
        _emit(args, render.describe(machine), render.table(machine))
    return EXIT_OK


def _arguments(schema: dict[str, Any]) -> str:
    """``name: type (required)`` for each property of a JSON schema, on one line."""
    required = set(schema.get("required", []))
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") or "/".join(str(o.get("type", "?")) for o in prop.get("anyOf", [])) or "any"
        parts.append(f"{name}: {kind}{' (required)' if name in required else ''}")
    return ", ".join(parts) or "(none)"


def cmd_tools(args: argparse.Namespace) -> int:
    """Every tool the configuration gives: built-ins, write_file/shell, plugins, MCP servers' tools."""
    settings = config.load(args.config)
    registry = registry_for(settings)
    unavailable = registry.load_providers()  # starts each MCP server once, to list its tools
    builtin = {tool.name for tool in BUILTIN_TOOLS} | {"write_file", "shell"}
    providers = {provider.name for provider in registry.providers()}
    rows = []
    for entry in registry.describe():
        prefix = entry["name"].partition(".")[0]
        source = ("builtin" if entry["name"] in builtin
                  else f"mcp:{prefix}" if "." in entry["name"] and prefix in providers else "plugin")
        rows.append({**entry, "source": source})
    lines = [f"{r['name']:<20} {r['effect']:<10} {r['source']:<12} {r['description']}\n"
             f"{'':<20} args: {_arguments(r['schema'])}" for r in rows]
    lines += [f"{name + '.*':<20} {'-':<10} {'mcp:' + name:<12} UNAVAILABLE: {why}" for name, why in unavailable.items()]
    _emit(args, {"tools": rows, "unavailable": unavailable}, "\n".join(lines))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pegasus", description="Run LLM agent tasks as state machines on actors.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("machines", parents=[common], help="show a state machine's states and transitions")
    p.add_argument("name", nargs="?", choices=machines.names(), help="machine to show (default: list them)")
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid state diagram")
    p.set_defaults(handler=cmd_machines)

    p = sub.add_parser("tools", parents=[common], help="list every tool: description, arguments, effect class")
    p.add_argument("--config", help="configuration file (default: $PEGASUS_CONFIG or <state dir>/pegasus.toml)")
    p.set_defaults(handler=cmd_tools)

    runtime_cli.add_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except PegasusError as exc:
        print(f"pegasus: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("pegasus: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``pegasus list | head``): nothing more to say, and
        # stdout must not be flushed again on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
