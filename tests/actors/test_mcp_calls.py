"""A worker's calls to its machine's MCP host (actors/mcp_calls.py), with a stand-in actor: a call the
host no longer holds (it died with it) ends unknown when effectful, and is sent once more otherwise."""

from __future__ import annotations

from typing import Any

from actors.mcp_calls import HOST_CHECK, MachineCalls
from actors.messages import McpAnswer, McpCall, McpHeld, McpHeldAnswer, McpSubscribe
from pegasus.config import Settings
from pegasus.tools.registry import ToolExecutionError, ToolOutcomeUnknown


class Actor:
    def __init__(self) -> None:
        self.hosts = 0
        self.sent: list[tuple[Any, Any]] = []
        self.wakeups: list[Any] = []

    def createActor(self, cls: Any, globalName: str) -> str:  # noqa: N802, N803 - Thespian's names
        self.hosts += 1
        return f"host-{self.hosts}"

    def send(self, to: Any, message: Any) -> None:
        self.sent.append((to, message))

    def wakeupAfter(self, delay: Any, payload: Any) -> None:  # noqa: N802
        self.wakeups.append(payload)


def test_a_call_lost_with_its_host_is_unknown_when_effectful_and_sent_again_otherwise() -> None:
    actor = Actor()
    calls = MachineCalls(actor)
    calls.start(Settings(), {"m.record": "effectful", "m.touch": "idempotent"}.get)
    calls.ask("w1", ("m", "record", {"mode": "x"}), "k1")
    calls.ask("w2", ("m", "touch", {}), "k2")
    calls.ask("w3", ("m", "other", {}), None)  # unknown to the registry: effectful
    assert [m.key for _, m in actor.sent if isinstance(m, McpCall)] == ["k1", "k2", None]
    assert actor.wakeups == [HOST_CHECK]  # one check armed while calls wait

    calls.check()
    assert isinstance(actor.sent[-1][1], McpHeld) and actor.sent[-1][1].calls == (1, 2, 3)
    assert actor.sent[-1][0] == "host-5"  # found again by its global name before the check
    answered = calls.answered(McpAnswer(3, True, "done"))  # answered before the host died
    assert answered is not None and answered[0].work == "w3" and answered[1:] == (True, "done")
    assert calls.answered(McpAnswer(3, True, "again")) is None

    ended = calls.lost(McpHeldAnswer((1, 2, 3), ()))  # a new host: it holds none of them
    assert [(asked.work, type(error)) for asked, error in ended] == [("w1", ToolOutcomeUnknown)]
    assert "m.record is effectful: not sent again" in ended[0][1].message
    resent = actor.sent[-1][1]
    assert isinstance(resent, McpCall) and (resent.call, resent.tool, resent.key) == (2, "touch", "k2")

    ended = calls.lost(McpHeldAnswer((2,), ()))  # lost again: sent twice already, a plain failure
    assert [(asked.work, type(error)) for asked, error in ended] == [("w2", ToolExecutionError)]
    assert calls.asking == {}
    assert calls.lost(McpHeldAnswer((1, 2), ())) == []  # answered or ended: nothing more
    assert any(isinstance(m, McpSubscribe) for _, m in actor.sent)
