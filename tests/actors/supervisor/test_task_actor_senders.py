"""A task actor's messages are told from its address once, not by Thespian's comparison at every report, and
an actor gone (its port taken by a new one) is never taken for the new one."""

from __future__ import annotations

from thespian.actors import ActorAddress

from actors.supervisor.task_actors import TaskActors
from pegasus.config import RuntimeSettings


class Details:
    """Stands in for Thespian's TCP address details: hashable, equal by port."""

    def __init__(self, port: int) -> None:
        self.port = port

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Details) and other.port == self.port

    def __hash__(self) -> int:
        return hash(self.port)


class Created(ActorAddress):
    """An address createActor answered: Thespian's comparison (several calls through its address manager), counted."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Created.compared += 1
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment] - as Thespian's


def actors(ports: list[int]) -> TaskActors:
    made = iter(ports)
    hosts = TaskActors(lambda: Created(Details(next(made))), lambda address, message: None,
                       lambda seconds: None)
    hosts.configure(RuntimeSettings(task_actors_min=1, task_actors_max=3, task_actor_runs=100))
    return hosts


def test_reports_of_one_task_actor_compare_its_address_once() -> None:
    hosts = actors([7001, 7002, 7003])
    host = hosts.take("t1", 1)
    port = host.addressDetails.port
    key = next(key for key, address in hosts.address.items() if address is host)
    Created.compared = 0
    for _ in range(20):  # each message's sender is a new address object (unpickled), equal to the first
        assert hosts.report(ActorAddress(Details(port)), 0.1) == key
    assert Created.compared <= len(hosts.address)
    assert hosts.sent_by("t1", hosts.key_of(ActorAddress(Details(port))))
    assert not hosts.sent_by("t1", None)
    assert hosts.key_of(ActorAddress(Details(9999))) is None  # not ours


def test_an_actor_gone_is_not_taken_for_a_new_one_on_its_port() -> None:
    hosts = actors([7001, 7001])  # the second actor gets the first one's port (the first died)
    first = hosts.take("t1", 1)
    old_key = hosts.key_of(ActorAddress(Details(7001)))
    assert old_key is not None and hosts.sent_by("t1", old_key)
    assert hosts.exited(first) == [("t1", 1)]
    assert hosts.key_of(ActorAddress(Details(7001))) is None  # forgotten with the actor
    hosts.take("t2", 1)
    new_key = hosts.key_of(ActorAddress(Details(7001)))
    assert new_key is not None and new_key != old_key
    assert hosts.sent_by("t2", new_key) and not hosts.sent_by("t1", new_key)
