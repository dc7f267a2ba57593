"""A leader's pool pinging its workers on members: round trips, last contact (pegasus/pool/contact.py).

A mixin of ``PoolCore``: the handlers of ``PingDue`` and ``Pong`` and the
contact kept on every report and finish from a member's worker.  Pure: the
carrier sends each ``Ping`` and turns the worker's answer into ``Pong``.
"""

from __future__ import annotations

from typing import Any

from pegasus.pool.commands import Arm, Ping
from pegasus.pool.contact import ping_period_s
from pegasus.pool.inputs import PingDue, Pong
from pegasus.pool.state import Out, PoolState, Slot


class Pinging(PoolState):
    ping_armed = False

    def _arm_ping(self, out: Out) -> None:
        if self.lead and not self.closing and not self.ping_armed and self.config is not None:
            self.ping_armed = True
            out.append(Arm(ping_period_s(self.config.settings.convention), PingDue()))

    def _ping_due(self, event: PingDue, out: Out) -> None:
        self.ping_armed = False
        now = self.clock()
        for slot in self.slots.values():
            member = self.members.get(slot.member)
            if not slot.local and slot.ready and not slot.jobs and member is not None:
                member.contact.sent()
                out.append(Ping(slot.address, now))
        self._arm_ping(out)

    def _ping_new(self, slot: Slot, out: Out) -> None:
        """A member's worker just ready: pinged at once, which arms its check for a pool that is gone
        (pegasus.pool.contact.PoolWatch).  PingDue pings only idle workers; one busy at every PingDue
        was never pinged, so it stayed after its leader died."""
        member = self.members.get(slot.member)
        if self.lead and not slot.local and member is not None:
            member.contact.sent()
            out.append(Ping(slot.address, self.clock()))

    def _pong(self, event: Pong, out: Out) -> None:
        slot = self._slot_at(event.address)
        if slot is not None and (member := self.members.get(slot.member)) is not None:
            member.contact.answered(self.clock() - event.sent_at, self.wall_clock())

    def _heard_from(self, slot: Slot | None) -> None:
        """Any message from a member's worker is a contact."""
        if slot is not None and not slot.local and (member := self.members.get(slot.member)) is not None:
            member.contact.heard(self.wall_clock())

    def _slot_at(self, address: Any) -> Slot | None:
        return next((s for s in self.slots.values() if s.address == address), None)
