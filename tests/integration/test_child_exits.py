"""actors/wire/thespian_patches/robustness/child_exits.py: a child that died while its parent handled a
sibling's exit is still announced to the parent, and the parent's exit then waits for no dead child (a
stage pool that had replaced two killed workers kept its admin's shutdown waiting 10 s, then was killed)."""

from __future__ import annotations

from thespian.actors import ActorExitRequest

from actors.runtime import procs
from actors.runtime.system import system_pids
from tests.support.child_deaths import Parent
from tests.support.waiting import wait_for

ASK = 90  # seconds: the parent's own waits are bounded at 60 s


def test_a_child_killed_while_a_sibling_exit_is_handled_is_announced_and_the_parent_stops(tcp_system) -> None:
    _spec, asys = tcp_system
    parent = asys.createActor(Parent)
    first, second, third = asys.ask(parent, "start", ASK)
    parent_pid = asys.ask(parent, "pid", ASK)
    asys.ask(parent, "kill", ASK)  # A killed and its exit queued, then B killed: B dies before A's exit is handled
    wait_for(lambda: asys.ask(parent, "exits", ASK) == [0, 1], what="both killed children announced")  # C lives
    assert not procs.is_alive(first) and not procs.is_alive(second) and procs.is_alive(third)
    asys.tell(parent, ActorExitRequest())  # it asks C to exit and waits for its children: for C only
    wait_for(lambda: not (procs.is_alive(parent_pid) or procs.is_alive(third)),
             what="the parent and its live child exited")


def test_a_system_whose_tool_pool_replaced_canceled_workers_stops_without_its_admin_giving_up(pegasus,
                                                                                              state_dir) -> None:
    client = pegasus(runtime={"max_active_tasks": 4})
    tasks = [client.submit(f"sleep {20 + n}")["task_id"] for n in range(3)]  # texts apart: none folded
    wait_for(lambda: all(w["busy"] for w in client.stats()["pools"]["tool"]["workers"]), what="three workers busy")
    for task in tasks:  # each worker SIGKILLed and replaced, close together
        client.cancel(task, "enough")
    wait_for(lambda: client.stats()["pools"]["tool"]["replaced"] == 3, what="the three workers replaced")
    pids = procs.identities(system_pids(client.spec))
    client.close()  # the system's stop: the admin asks every actor to exit and waits for them
    assert not [pid for pid, start in pids.items() if procs.is_alive(pid, start)]
    assert "No response to Admin shutdown request" not in (state_dir / "logs" / "thespian.log").read_text()
