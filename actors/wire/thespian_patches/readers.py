"""Thespian internals a carrier calls or reads without patching them, pinned and checked like a patch's targets.

One entry: ``actors/wire/leaving.py``'s ``take_arrived_acks`` steps the transport's waiting intents itself.
Checked and reported with the speed patches (a warning where it cannot apply); where it cannot, the carrier
reads nothing and Thespian's loop does it a pass later.  docs/thespian-patches.md#arrived-acknowledgements.
"""

from __future__ import annotations

from thespian.system.transport import TCPTransport as _tcp

from actors.wire.thespian_patches.base import Kind, Patch, Target

_T = _tcp.TCPTransport
ARRIVED_ACKS = Patch("arrived_acks", Kind.SPEED, "arrived-acknowledgements", (
    Target(_T, "__init__", "source eabcf02e37125c2a"),  # _transmitIntents: fileno -> intent
    Target(_T, "_processIntents", "source ad3cc2f41f844085"),  # one intent's next step, by its fileno
    Target(_T, "_nextTransmitStepCheck", "source 58074f46110391a9"),
    Target(_T, "_next_XMIT_3", "source 5f5ff30046f7a92e"),  # sets the stage below once a message is sent whole
    Target(_T, "_XMITStepWaitForAck", "value"),
    Target(_T, "_exclusively_processing", "source a6c3b7b1c0850ed1"),  # the transport's one-thread flag
    Target(_T, "_not_processing", "source 4fc791a7d9ce4478"),
))
READERS = (ARRIVED_ACKS,)
