"""The supervisor is a carrier of tables: every request the supervisor answers has one row, the actor class
mixes nothing in, and a row is a plain function of the supervisor's Context."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from thespian.actors import Actor

from actors import messages as m
from actors.supervisor import Supervisor
from actors.supervisor import carrier
from actors.supervisor.carrier import REPORTS, ROWS, TIMERS
from pegasus import requests as r

GUARDIANS = {m.Locate}  # asked of the guardian, not the supervisor


def test_every_request_has_one_row_and_the_actor_mixes_nothing_in() -> None:
    requests = {getattr(r, name) for name in r.__all__ if isinstance(getattr(r, name), type)
                and issubclass(getattr(r, name), r.Request) and getattr(r, name) is not r.Request}
    assert requests - GUARDIANS <= set(ROWS), sorted(k.__name__ for k in requests - GUARDIANS - set(ROWS))
    assert Supervisor.__bases__ == (Actor,)
    assert not [name for name in vars(Supervisor) if name.startswith("receiveMsg_")]


def test_each_row_takes_the_context_first() -> None:
    for table in (ROWS, REPORTS, TIMERS):
        for kind, row in table.items():
            first = next(iter(inspect.signature(row).parameters))
            assert first == "ctx", (kind.__name__, row)


def test_every_timer_the_supervisor_arms_has_a_row() -> None:
    """A wakeup whose payload has no row would be dropped in silence (a recall waiting for its vector
    forever, a retention sweep never run): each ``wake(seconds, m.X(...))`` in the package has a TIMERS row."""
    armed = set()
    for path in Path(carrier.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("wake") \
                    and len(node.args) == 2 and isinstance(node.args[1], ast.Call):
                made = node.args[1].func
                assert isinstance(made, ast.Attribute), ast.unparse(node)
                armed.add(getattr(m, made.attr))
    assert {m.RetryDue, m.RecallVectorDue, m.VectorsDue, m.RetentionDue, m.TaskActorsDue} <= armed
    assert armed <= set(TIMERS), sorted(kind.__name__ for kind in armed - set(TIMERS))
