"""A machine's diagram as SVG, laid out from its definition (``pegasus.task.render.describe``'s data).

Pure: a description in, SVG text out, every text escaped; the page lights states and edges by the
names given here (``data-state``, ``data-from``/``data-to``).  A state's column is its breadth-first
distance from the initial state, so the usual path reads left to right; states reached only by a
special row go last, their edges hidden until taken.  Labels are set in a monospace font of known
advance (``CHAR_W``), so each is placed where its box meets no state and no other label, and the
drawing grows to hold every box (docs/dashboard.md; tests/integration/test_dashboard_views.py).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

NODE_W, NODE_H = 118, 34
COL_GAP, ROW_GAP = 104, 34
CHAR_W, LINE_H = 5.6, 11.0  # a label's advance per character and line height (9 px monospace, app.css), a bit over
PAD = 3.0  # space kept around each label's box
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


Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    def meets(self, other: Box) -> bool:
        return (self.x < other.x + other.w and other.x < self.x + self.w
                and self.y < other.y + other.h and other.y < self.y + self.h)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    labels: tuple[str, ...]
    path: str  # SVG path data
    label_at: tuple[float, float]  # the middle of the label's top line (its lines are centred there, downwards)
    special: bool
    label_box: Box = Box(0, 0, 0, 0)  # where the label's lines go (their top left, their size)


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


def _at(curve: tuple[Point, Point, Point, Point], t: float) -> Point:
    """The point of a cubic curve at ``t``."""
    u = 1 - t
    weights = (u ** 3, 3 * u * u * t, 3 * u * t * t, t ** 3)
    return (sum(w * p[0] for w, p in zip(weights, curve, strict=True)),
            sum(w * p[1] for w, p in zip(weights, curve, strict=True)))


def _path(curve: tuple[Point, Point, Point, Point]) -> str:
    p0, p1, p2, p3 = curve
    return (f"M{p0[0]:.1f},{p0[1]:.1f} C{p1[0]:.1f},{p1[1]:.1f} {p2[0]:.1f},{p2[1]:.1f} "
            f"{p3[0]:.1f},{p3[1]:.1f}")


def _route(a: Node, b: Node, column: dict[str, int], bottom: float) -> tuple[Point, Point, Point, Point]:
    """A curve from state ``a`` to ``b``: rightwards when ``b`` lies in a later column, else under the states."""
    if a.state == b.state:
        left, right, top = (a.x + NODE_W * 0.3, a.y), (a.x + NODE_W * 0.7, a.y), a.y - LOOP_H
        return right, (right[0] + 14, top), (left[0] - 14, top), left
    span = column[b.state] - column[a.state]
    if span > 0:
        start, end = (a.x + NODE_W, a.cy), (b.x, b.cy)
        bend = (end[0] - start[0]) / 2
        return start, (start[0] + bend, start[1]), (end[0] - bend, end[1]), end
    if span == 0:  # same column: along the right side
        start, end = (a.x + NODE_W, a.cy), (b.x + NODE_W, b.cy)
        out = a.x + NODE_W + COL_GAP * 0.45
        return start, (out, start[1]), (out, end[1]), end
    low = bottom + BELOW + 8 * (abs(span) - 1)
    start, end = (a.cx, a.y + NODE_H), (b.cx + 10, b.y + NODE_H)
    return start, (start[0], low), (end[0], low), end


ALONG = (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8)
ASIDE = (0.0, -1.0, 1.0, -2.0, 2.0, -3.0, 3.0)


def _place(lines: tuple[str, ...], curve: tuple[Point, Point, Point, Point], taken: list[Box]) -> Box:
    """The label's box: the first spot along the curve, then beside it, that meets no box ``taken``;
    failing all, straight below its middle, lower until free (always ends: the boxes are finitely many)."""
    w = max(len(line) for line in lines) * CHAR_W + 2 * PAD
    h = len(lines) * LINE_H + 2 * PAD

    def box_at(x: float, y: float) -> Box:
        return Box(max(0.0, x - w / 2), max(0.0, y - h / 2), w, h)

    for t in ALONG:
        x, y = _at(curve, t)
        for step in ASIDE:
            box = box_at(x, y + step * (h / 2 + 4))
            if not any(box.meets(other) for other in taken):
                return box
    x, y = _at(curve, 0.5)
    box = box_at(x, y)
    while any(box.meets(other) for other in taken):
        box = Box(box.x, box.y + 6, w, h)
    return box


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
    taken = [Box(n.x - PAD, n.y - PAD, NODE_W + 2 * PAD, NODE_H + 2 * PAD) for n in nodes.values()]
    # the table's rows first (always shown), then the special ones: none may land on another
    for (source, target, special), events in sorted(labels.items(), key=lambda item: item[0][2]):
        curve = _route(nodes[source], nodes[target], column, bottom)
        lines = tuple(_short(event) for event in dict.fromkeys(events))
        box = _place(lines, curve, taken)
        taken.append(box)
        edges.append(Edge(source, target, lines, _path(curve), (box.x + box.w / 2, box.y + PAD), special, box))
    spans = [column[e.target] - column[e.source] for e in edges if e.source != e.target]
    deepest = max((-s for s in spans if s < 0), default=0)
    width = max(MARGIN * 2 + (max(column.values()) + 1) * (NODE_W + COL_GAP) - COL_GAP,
                max(e.label_box.x + e.label_box.w for e in edges) + MARGIN if edges else 0)
    height = max(bottom + MARGIN + (BELOW + 8 * deepest if deepest else 0),
                 max(e.label_box.y + e.label_box.h for e in edges) + MARGIN if edges else 0)
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
        x, top = edge.label_at
        lines = "".join(f'<tspan x="{x:.1f}" y="{top + LINE_H * (i + 1) - 2.5:.1f}">{escape(line)}</tspan>'
                        for i, line in enumerate(edge.labels))
        parts.append(f'<g class="edge{" special" if edge.special else ""}" data-from={quoteattr(edge.source)} '
                     f'data-to={quoteattr(edge.target)}><title>{escape(f"{edge.source} -> {edge.target}: {text}")}'
                     f'</title><path d="{edge.path}" marker-end="url(#{marker})"/><text>{lines}</text></g>')
    for node in drawn.nodes.values():
        parts.append(f'<g class="state {node.kind}" data-state={quoteattr(node.state)}><title>{escape(node.state)}'
                     f'</title><rect x="{node.x:.0f}" y="{node.y:.0f}" width="{NODE_W}" height="{NODE_H}" rx="8"/>'
                     f'<text x="{node.cx:.0f}" y="{node.cy + 4:.0f}">{escape(node.state)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str, limit: int = 32) -> str:
    """A label short enough to sit on its edge (the whole one is the edge's tooltip)."""
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"
