"""The dashboard's machine diagrams (pegasus.dashboard.diagram): every state and move drawn, named for the
page to light, every text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.dashboard.diagram import NODE_H, NODE_W, Box, Layout, layout, svg
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


def _clear_of_each_other(drawn: Layout) -> None:
    """No label box meets a state's box or another label's; all lie inside the drawing."""
    states = [Box(n.x, n.y, NODE_W, NODE_H) for n in drawn.nodes.values()]
    labels = [e.label_box for e in drawn.edges]
    for i, box in enumerate(labels):
        assert 0 <= box.x and box.x + box.w <= drawn.width and 0 <= box.y and box.y + box.h <= drawn.height, box
        assert not any(box.meets(state) for state in states), (drawn.edges[i], box)
        assert not any(box.meets(other) for other in labels[i + 1:]), (drawn.edges[i], box)


@pytest.mark.parametrize("name", machines.names())
def test_labels_meet_no_state_and_no_other_label(name: str) -> None:
    """Each shipped machine: every label (special ones too) has a box of its own, each event on its own line,
    whole (the browser's boxes: tests/integration/test_dashboard_views.py)."""
    drawn = layout(describe(machines.get(name)))
    _clear_of_each_other(drawn)
    assert all("\u2026" not in line for e in drawn.edges for line in e.labels)


EVENT = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=24)


@st.composite
def _described(draw: st.DrawFn) -> dict:
    states = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=8), min_size=2, max_size=9, unique=True))
    rows = draw(st.lists(st.tuples(st.sampled_from(states), EVENT, st.sampled_from(states)), max_size=24))
    return {"name": "m", "states": states, "initial": states[0], "terminal": [states[-1]], "active": states[1:-1],
            "transitions": [{"from": a, "event": e, "kind": "static", "to": b} for a, e, b in rows],
            "special": draw(st.lists(st.fixed_dictionaries({"event": EVENT, "to": st.sampled_from(states),
                                                            "from": st.sampled_from(["active", "non_terminal"])}),
                                     max_size=2))}


@given(_described())
@settings(max_examples=150, deadline=None)
def test_any_machines_labels_are_clear_of_each_other(described: dict) -> None:
    """Whatever the table (self-loops, backward and same-column edges, many events on one edge), the placed
    labels meet no state and no other label and fit in the drawing."""
    _clear_of_each_other(layout(described))
