"""Commands that need no running system: machines (the state machines) and tools (what a
configuration gives)."""

from __future__ import annotations

import argparse

from actors.cli import views
from actors.cli.base import EXIT_OK, emit
from pegasus import config
from pegasus.task import machines as machine_tables, render
from pegasus.tools.catalogue import argument_summary, catalogue


def machines(args: argparse.Namespace) -> int:
    if args.name is None:
        rows = [render.describe(m) for m in machine_tables.MACHINES.values()]
        emit(args, rows, "\n".join(f"{r['name']:<11} {len(r['states']):>2} states  {r['description']}" for r in rows))
        return EXIT_OK
    machine = machine_tables.get(args.name)
    if args.mermaid:
        print(render.mermaid(machine))
    else:
        emit(args, render.describe(machine), render.table(machine))
    return EXIT_OK


def tools(args: argparse.Namespace) -> int:
    """Every tool the configuration gives: built-ins, write_file/shell, plugins, MCP servers' tools."""
    found = catalogue(config.load(args.config))  # starts each MCP server once, to list its tools
    emit(args, found, views.tools_text(found, argument_summary))
    return EXIT_OK
