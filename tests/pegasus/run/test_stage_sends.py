"""A task actor's stage requests to one pool made while its last message is undelivered go together once it is
delivered (issue 33: at L = 0 a request found ~11 others to its pool in Thespian's queue, each looked at on every
pass of the loop): the policy alone, then in the host core."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from pegasus.run.host import AskPool, AskPools, ReadAcks, StagesDelivered
from pegasus.run.stage_sends import PoolSends
from tests.pegasus.run.test_task_host import LLM, SUP, answer, host, of, settled, start

class Unhashable:
    """A pool address as Thespian's are: compared, never hashed."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unhashable) and other.name == self.name


POOLS = ("llm", "tool")


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(("add", "delivered")), st.sampled_from(POOLS)), max_size=60),
       limit=st.integers(1, 4))
def test_any_interleaving_sends_each_request_once_in_order_one_message_in_flight_per_pool(
        steps: list[tuple[str, str]], limit: int) -> None:
    sends = PoolSends(limit)
    made: dict[str, list[int]] = {pool: [] for pool in POOLS}
    sent: dict[str, list[int]] = {pool: [] for pool in POOLS}
    in_flight = dict.fromkeys(POOLS, 0)

    def went(pool: str, batch: tuple[Any, ...]) -> None:
        if batch:
            assert len(batch) <= limit
            in_flight[pool] += 1
            sent[pool] += batch

    for number, (kind, pool) in enumerate(steps):
        if kind == "add":
            made[pool].append(number)
            went(pool, sends.add(Unhashable(pool), number))
        elif in_flight[pool]:  # (Thespian says delivered only for a message sent)
            in_flight[pool] -= 1
            went(pool, sends.delivered(Unhashable(pool)))
        assert all(count <= 1 for count in in_flight.values())
    for pool in POOLS:  # every delivery said: nothing is left
        while in_flight[pool]:
            in_flight[pool] -= 1
            went(pool, sends.delivered(Unhashable(pool)))
        assert sent[pool] == made[pool]
    assert not sends.busy and not sends.held


def test_eight_answers_read_together_ask_their_pool_in_two_messages_not_eight() -> None:
    core = host()
    asks = {task: of(AskPool, settled(core, start(task)))[0] for task in [f"t{n}" for n in range(8)]}
    out = [command for ask in asks.values() for command in core.step(answer(ask))]  # one pass of the loop
    assert [type(command) for command in out if isinstance(command, (AskPool, AskPools, ReadAcks))] == \
        [AskPool] + [ReadAcks] * 7  # the first goes; the others wait for it (the carrier reads an arrived ack)
    [together] = core.step(StagesDelivered(LLM))
    assert isinstance(together, AskPools) and together.to == LLM
    assert [ask.stage.task_id for ask in together.asks] == [f"t{n}" for n in range(1, 8)]
    assert all(ask.stage.stage == "think" and core.asked[ask.stage.task_id] is ask for ask in together.asks)
    assert core.step(StagesDelivered(LLM)) == []


def test_a_memory_step_to_the_supervisor_is_never_held() -> None:
    core = host()
    ask = of(AskPool, settled(core, start("a")))[0]
    memory = AskPool(SUP, ask.stage, None)
    assert core._ask([memory, memory]) == [memory, memory]  # noqa: SLF001 - the supervisor takes no AskPools
