"""``pegasus tree ID``: a task and its sub-tasks, each with its lifecycle and machine states."""

from __future__ import annotations

import argparse
from typing import Any

from actors import messages as m
from actors.cli.base import EXIT_OK, ask, emit
from actors.cli.views import clean

WIDTH = 60  # of a node's input on its line


def tree(args: argparse.Namespace) -> int:
    node = ask(args, m.Tree(task_id=args.task_id))
    emit(args, node, "\n".join(tree_lines(node)))
    return EXIT_OK


def tree_lines(node: dict[str, Any], indent: str = "", last: bool = True, root: bool = True) -> list[str]:
    """One line per task, drawn as a tree: id, lifecycle/cognitive states, what it waits for, its input."""
    text = clean(node.get("input") or "")
    text = text if len(text) <= WIDTH else text[:WIDTH - 3] + "..."
    waiting = ", waiting for sub-tasks" if node.get("waiting") else ""
    step = f"step {node['step_index']}: " if "step_index" in node else ""
    branch = "" if root else ("└─ " if last else "├─ ")
    lines = [f"{indent}{branch}{step}{node['task_id']}  {node['lifecycle_state']}/{node['state']}{waiting}  {text}"]
    below = indent if root else indent + ("   " if last else "│  ")
    children = node.get("children") or []
    for n, child in enumerate(children):
        lines += tree_lines(child, below, n == len(children) - 1, False)
    return lines
