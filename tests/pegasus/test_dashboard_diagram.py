"""The dashboard's machine diagrams (pegasus.dashboard.diagram): every state and move drawn, named for the
page to light, every text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pegasus.dashboard.diagram import NODE_H, NODE_W, layout, svg
from pegasus.task import machines
from pegasus.task.render import describe

NS = {"svg": "http://www.w3.org/2000/svg"}


def _moves(described: dict) -> set[tuple[str, str]]:
    return {(row["from"], target) for row in described["transitions"]
            for target in (row["to"] if isinstance(row["to"], list) else [row["to"]])}


@pytest.mark.parametrize("name", machines.names())
def test_every_state_and_row_is_drawn_once(name: str) -> None:
    """Each state is one group named by data-state, each (from, to) of the table one edge, specials apart."""
    described = describe(machines.get(name))
    root = ET.fromstring(svg(described))
    states = [g.get("data-state") for g in root.iterfind("svg:g", NS) if "state" in g.get("class", "").split()]
    assert sorted(states) == sorted(described["states"])
    edges = [(g.get("data-from"), g.get("data-to"), "special" in g.get("class", "").split())
             for g in root.iterfind("svg:g", NS) if "edge" in g.get("class", "").split()]
    assert {(a, b) for a, b, special in edges if not special} == _moves(described)
    assert len(edges) == len(set(edges))
    assert root.get("data-machine") == name


def test_special_rows_are_edges_hidden_until_taken() -> None:
    """classic's TASK_FAILED from any non-terminal state: a special edge from each, classed for the page to show."""
    described = describe(machines.get("classic"))
    specials = {(e.source, e.target) for e in layout(described).edges if e.special}
    assert ("perceiving", "failed") in specials and ("planning", "suspended") in specials
    assert not specials & _moves(described)


def test_states_do_not_overlap_and_read_left_to_right() -> None:
    """The usual path of each machine goes rightwards; no two states share a box."""
    for name in machines.names():
        drawn = layout(describe(machines.get(name)))
        boxes = [(n.x, n.y) for n in drawn.nodes.values()]
        assert len(set(boxes)) == len(boxes)
        for a in drawn.nodes.values():
            for b in drawn.nodes.values():
                if a is not b:
                    assert abs(a.x - b.x) >= NODE_W or abs(a.y - b.y) >= NODE_H, (name, a, b)
        assert all(0 <= n.x and n.x + NODE_W <= drawn.width and n.y + NODE_H <= drawn.height
                   for n in drawn.nodes.values())
    classic = layout(describe(machines.get("classic"))).nodes
    order = ["idle", "perceiving", "thinking", "planning", "acting", "reflecting", "completed"]
    assert [classic[s].x for s in order] == sorted(classic[s].x for s in order)


def test_text_is_escaped() -> None:
    """A state or event with markup in its name is drawn as text, never as markup."""
    described = {"name": "x<y", "states": ["<b>a</b>", "b&c"], "initial": "<b>a</b>", "terminal": ["b&c"],
                 "active": [], "transitions": [{"from": "<b>a</b>", "event": "<script>", "kind": "static",
                                                "to": "b&c"}], "special": []}
    text = svg(described)
    assert "<script>" not in text and "<b>" not in text
    root = ET.fromstring(text)
    assert {g.get("data-state") for g in root.iterfind("svg:g", NS) if g.get("data-state")} == {"<b>a</b>", "b&c"}


def test_describe_names_each_states_stage() -> None:
    """The description the gateway's /v1/machines returns says what each state runs (the page's stage column)."""
    assert describe(machines.get("classic"))["stages"]["acting"] == {"stage": "act", "pool": "tool"}
    assert describe(machines.get("reason_act"))["stages"]["reasoning"] == {"stage": "reason", "pool": "llm"}
    assert describe(machines.get("lifecycle"))["stages"] == {}
