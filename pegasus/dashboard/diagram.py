"""A machine's diagram as SVG, laid out from its definition (``pegasus.task.render.describe``'s data).

Pure: a description in, SVG text out; the dashboard's page lights the current state and the path a
task took by adding classes to the elements named here (``data-state`` on each state's group,
``data-from``/``data-to`` on each edge). Every text is escaped.

Layout: a state's column is its distance from the initial state along the table's rows (breadth
first), so the usual path reads left to right; states reached only by a special row (an event
allowed from every active or non-terminal state: failed, suspended) go in the last column, and
their edges are drawn only when a task took one (``special`` edges, hidden until lit).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

NODE_W, NODE_H = 118, 34
COL_GAP, ROW_GAP = 96, 26
MARGIN = 24
LOOP_H = 22  # a self-loop's height above its state
BELOW = 28  # how far below the lowest state a backward edge runs (more per column it spans)


@dataclass(frozen=True)
class Node:
    state: str
    x: float
    y: float
    kind: str  # initial, terminal, active or other

    @property
    def cx(self) -> float:
        return self.x + NODE_W / 2

    @property
    def cy(self) -> float:
        return self.y + NODE_H / 2


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    labels: tuple[str, ...]
    path: str  # SVG path data
    label_at: tuple[float, float]
    special: bool


@dataclass(frozen=True)
class Layout:
    name: str
    width: float
    height: float
    nodes: dict[str, Node]
    edges: tuple[Edge, ...]


def _targets(row: dict[str, Any]) -> list[str]:
    return list(row["to"]) if isinstance(row["to"], list) else [row["to"]]


def _columns(described: dict[str, Any]) -> dict[str, int]:
    """Each state's column: its breadth-first distance from the initial state over the rows."""
    after: dict[str, list[str]] = {}
    for row in described["transitions"]:
        after.setdefault(row["from"], []).extend(_targets(row))
    column = {described["initial"]: 0}
    queue = deque([described["initial"]])
    while queue:
        state = queue.popleft()
        for target in after.get(state, []):
            if target not in column:
                column[target] = column[state] + 1
                queue.append(target)
    last = max(column.values(), default=0)
    # Reached only by a special row: the last column (one further when the last holds terminal states already).
    for state in described["states"]:
        column.setdefault(state, last)
    return column


def _special_sources(described: dict[str, Any], sources: str) -> list[str]:
    if sources == "active":
        return list(described["active"])
    terminal = set(described["terminal"])
    return [s for s in described["states"] if s not in terminal]


def _kind(described: dict[str, Any], state: str) -> str:
    if state == described["initial"]:
        return "initial"
    if state in described["terminal"]:
        return "terminal"
    return "active" if state in described["active"] else "other"


def _cubic(p0: tuple[float, float], p1: tuple[float, float], p2: tuple[float, float],
           p3: tuple[float, float]) -> tuple[str, tuple[float, float]]:
    """The path data of a cubic curve and its midpoint (where its label goes)."""
    mid = tuple(0.125 * a + 0.375 * b + 0.375 * c + 0.125 * d for a, b, c, d in zip(p0, p1, p2, p3, strict=True))
    path = (f"M{p0[0]:.1f},{p0[1]:.1f} C{p1[0]:.1f},{p1[1]:.1f} {p2[0]:.1f},{p2[1]:.1f} "
            f"{p3[0]:.1f},{p3[1]:.1f}")
    return path, (mid[0], mid[1])


def _route(a: Node, b: Node, column: dict[str, int], bottom: float) -> tuple[str, tuple[float, float]]:
    """A curve from state ``a`` to ``b``: rightwards when ``b`` lies in a later column, else under the states."""
    if a.state == b.state:
        left, right, top = (a.x + NODE_W * 0.3, a.y), (a.x + NODE_W * 0.7, a.y), a.y - LOOP_H
        return _cubic(right, (right[0] + 14, top), (left[0] - 14, top), left)
    span = column[b.state] - column[a.state]
    if span > 0:
        start, end = (a.x + NODE_W, a.cy), (b.x, b.cy)
        bend = (end[0] - start[0]) / 2
        return _cubic(start, (start[0] + bend, start[1]), (end[0] - bend, end[1]), end)
    if span == 0:  # same column: along the right side
        start, end = (a.x + NODE_W, a.cy), (b.x + NODE_W, b.cy)
        out = a.x + NODE_W + COL_GAP * 0.45
        return _cubic(start, (out, start[1]), (out, end[1]), end)
    low = bottom + BELOW + 8 * (abs(span) - 1)
    start, end = (a.cx, a.y + NODE_H), (b.cx + 10, b.y + NODE_H)
    return _cubic(start, (start[0], low), (end[0], low), end)


def layout(described: dict[str, Any]) -> Layout:
    """Where each state and edge of the described machine goes."""
    column = _columns(described)
    rows: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for state in described["states"]:
        col = column[state]
        row = rows.get(col, 0)
        rows[col] = row + 1
        nodes[state] = Node(state, MARGIN + col * (NODE_W + COL_GAP), MARGIN + LOOP_H + row * (NODE_H + ROW_GAP),
                            _kind(described, state))
    bottom = max(n.y + NODE_H for n in nodes.values())
    labels: dict[tuple[str, str, bool], list[str]] = {}
    for row in described["transitions"]:
        for target in _targets(row):
            labels.setdefault((row["from"], target, False), []).append(row["event"])
    for special in described.get("special", []):
        for source in _special_sources(described, special["from"]):
            if (source, special["to"], False) not in labels and source != special["to"]:
                labels.setdefault((source, special["to"], True), []).append(special["event"])
    edges = []
    for (source, target, special), events in labels.items():
        path, at = _route(nodes[source], nodes[target], column, bottom)
        edges.append(Edge(source, target, tuple(dict.fromkeys(events)), path, at, special))
    spans = [column[e.target] - column[e.source] for e in edges if e.source != e.target]
    deepest = max((-s for s in spans if s < 0), default=0)
    width = MARGIN * 2 + (max(column.values()) + 1) * (NODE_W + COL_GAP) - COL_GAP
    height = bottom + MARGIN + (BELOW + 8 * deepest if deepest else 0)
    return Layout(described["name"], width, height, nodes, tuple(edges))


def svg(described: dict[str, Any]) -> str:
    """The machine's diagram: an ``<svg>`` element, each state a ``g.state[data-state]``, each edge a
    ``g.edge[data-from][data-to]`` (``.special`` for the special rows' edges), its events as the label."""
    drawn = layout(described)
    marker = "arrow-" + re.sub(r"[^A-Za-z0-9_-]", "_", drawn.name)  # an id: safe in url(#...)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="machine" data-machine={quoteattr(drawn.name)} '
             f'viewBox="0 0 {drawn.width:.0f} {drawn.height:.0f}" width="{drawn.width:.0f}" '
             f'height="{drawn.height:.0f}" role="img" aria-label={quoteattr(f"state machine {drawn.name}")}>',
             f'<defs><marker id={quoteattr(marker)} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']
    for edge in drawn.edges:
        text = " / ".join(edge.labels)
        parts.append(f'<g class="edge{" special" if edge.special else ""}" data-from={quoteattr(edge.source)} '
                     f'data-to={quoteattr(edge.target)}><title>{escape(f"{edge.source} -> {edge.target}: {text}")}'
                     f'</title><path d="{edge.path}" marker-end="url(#{marker})"/>'
                     f'<text x="{edge.label_at[0]:.1f}" y="{edge.label_at[1] - 3:.1f}">{escape(_short(text))}</text></g>')
    for node in drawn.nodes.values():
        parts.append(f'<g class="state {node.kind}" data-state={quoteattr(node.state)}><title>{escape(node.state)}'
                     f'</title><rect x="{node.x:.0f}" y="{node.y:.0f}" width="{NODE_W}" height="{NODE_H}" rx="8"/>'
                     f'<text x="{node.cx:.0f}" y="{node.cy + 4:.0f}">{escape(node.state)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str, limit: int = 28) -> str:
    """A label short enough to sit on its edge (the whole one is the edge's tooltip)."""
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"
