"""A worker's calls to its machine's MCP host (pegasus/worker/host_calls.py), without an actor system: a
call the host no longer holds (it died with it) ends unknown when effectful, and is sent once more otherwise."""

from __future__ import annotations

from pegasus.config import Settings
from pegasus.tools.registry import ToolExecutionError, ToolOutcomeUnknown
from pegasus.worker.commands import Arm, AskHeld, CallHost, FindHost, WorkerCommand
from pegasus.worker.host_calls import HOST_CHECK_S, HostCalls
from pegasus.worker.inputs import HostCheckDue


class Host:
    """Carries out FindHost as the carrier does: a fresh address each time (Thespian makes one again
    under the global name when the last one died), then ``found``."""

    def __init__(self) -> None:
        self.calls = HostCalls()
        self.hosts = 0
        self.sent: list[WorkerCommand] = []

    def carry(self, out: list[WorkerCommand]) -> None:
        for command in out:
            self.sent.append(command)
            if isinstance(command, FindHost):
                self.hosts += 1
                found: list[WorkerCommand] = []
                self.calls.found(f"host-{self.hosts}", found)
                self.carry(found)


def test_a_call_lost_with_its_host_is_unknown_when_effectful_and_sent_again_otherwise() -> None:
    host = Host()
    calls = host.calls
    out: list[WorkerCommand] = []
    calls.start(Settings(), {"m.record": "effectful", "m.touch": "idempotent"}.get, out)
    host.carry(out)
    for work, call, key in (("w1", ("m", "record", {"mode": "x"}), "k1"), ("w2", ("m", "touch", {}), "k2"),
                            ("w3", ("m", "other", {}), None)):  # m.other is unknown to the registry: effectful
        out = []
        calls.ask(work, call, key, out)
        host.carry(out)
    assert [(m.host, m.number, m.key) for m in host.sent if isinstance(m, CallHost)] == [
        ("host-2", 1, "k1"), ("host-3", 2, "k2"), ("host-4", 3, None)]  # found again before each call
    assert [m for m in host.sent if isinstance(m, Arm)] == [Arm(HOST_CHECK_S, HostCheckDue())]  # one check armed

    out = []
    calls.check(out)
    host.carry(out)
    assert host.sent[-2:] == [AskHeld("host-5", (1, 2, 3)), Arm(HOST_CHECK_S, HostCheckDue())]
    answered = calls.answered(3)  # answered before the host died
    assert answered is not None and answered.work == "w3"
    assert calls.answered(3) is None

    out = []
    ended = calls.lost((1, 2, 3), (), out)  # a new host: it holds none of them
    assert [(asked.work, type(error)) for asked, error in ended] == [("w1", ToolOutcomeUnknown)]
    assert "m.record is effectful: not sent again" in ended[0][1].message
    assert out == [CallHost("host-5", 2, "m", "touch", {}, "k2")]  # to the host just found, not found again

    ended = calls.lost((2,), (), out)  # lost again: sent twice already, a plain failure
    assert [(asked.work, type(error)) for asked, error in ended] == [("w2", ToolExecutionError)]
    assert calls.asking == {}
    assert calls.lost((1, 2), (), out) == []  # answered or ended: nothing more
    out = []
    calls.check(out)
    assert out == []  # nothing waits: the host is left alone
    assert calls.host_exited("host-5") and not calls.host_exited("host-4")
