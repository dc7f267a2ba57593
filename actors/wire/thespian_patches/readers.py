"""Thespian internals a carrier calls or reads without patching them, pinned and checked like a patch's targets.

``leaving.py`` steps the waiting intents (``arrived_acks``), sends with a callback (``sent_callbacks``) and
reads how much of a message is written (``written_whole``); ``read_ahead.py`` reads the envelopes not yet
handed over (``read_ahead``); a client's ``send`` waits for its own intent (``client_sends``).  Where a speed
reader cannot apply, one warning, and its carrier reads nothing; where a robustness one cannot, no start.
docs/thespian-patches.md: arrived-acknowledgements, sent-callbacks, written-whole, read-ahead, client-sends.
"""

from __future__ import annotations

from thespian import actors as _actors
from thespian.system import actorManager as _manager
from thespian.system import systemBase as _system
from thespian.system import systemCommon as _common
from thespian.system import transport as _transport
from thespian.system.transport import TCPTransport as _tcp
from thespian.system.transport import wakeupTransportBase as _wakeup

from actors.wire.thespian_patches.base import Kind, Patch, Target

_T = _tcp.TCPTransport
_INTENT = _transport.TransmitIntent
ARRIVED_ACKS = Patch("arrived_acks", Kind.SPEED, "arrived-acknowledgements", (
    Target(_T, "__init__", "source eabcf02e37125c2a"),  # _transmitIntents: fileno -> intent
    Target(_T, "_processIntents", "source ad3cc2f41f844085"),  # one intent's next step, by its fileno
    Target(_T, "_nextTransmitStepCheck", "source 58074f46110391a9"),
    Target(_T, "_next_XMIT_3", "source 5f5ff30046f7a92e"),  # sets the stage below once a message is sent whole
    Target(_T, "_XMITStepWaitForAck", "value"),
    Target(_T, "_exclusively_processing", "source a6c3b7b1c0850ed1"),  # the transport's one-thread flag
    Target(_T, "_not_processing", "source 4fc791a7d9ce4478"),
))
# Without it a worker could not tell when its result has left, and would say a job over while the result
# may still die with it: robustness.
SENT_CALLBACKS = Patch("sent_callbacks", Kind.ROBUSTNESS, "sent-callbacks", (
    Target(_actors.Actor, "send", "source 999706f74a26b4c0"),  # self._myRef.actor_send(to, message)
    Target(_manager.ActorManager, "actor_send", "source 83cab60ae6f4b5e6"),  # an intent, onError=actor_send_fail
    Target(_manager.ActorManager, "actor_send_fail", "source a7772a9295acf41b"),  # dead letters to the admin
    Target(_common.systemCommonBase, "_send_intent", "source c2bfa761bf6d20d7"),
    Target(_INTENT, "__init__", "source 40cd9b467a3bd968"),  # (targetAddr, msg, onSuccess, onError, ...)
    Target(_INTENT, "addCallback", "source 7fce454fe7e78adc"),  # chained: every callback runs
    Target(_INTENT, "tx_done", "source 69a999c7abbc56ee"),  # delivered or failed for good: the callbacks, once
    Target(_INTENT, "completionCallback", "source f079fa704caa554f"),
    Target(_transport, "ResultCallback", "source de56981e0adbd497"),
))
WRITTEN_WHOLE = Patch("written_whole", Kind.SPEED, "written-whole", (
    Target(_T, "scheduleTransmit", "source d967b8d19ac0f963"),  # serMsg: the bytes to write
    Target(_T, "_schedulePreparedIntent", "source 3db9d6056104ae77"),
    Target(_T, "_scheduleTransmitActual", "source d162b77006bbfcf3"),  # writes at once when nothing waits before it
    Target(_T, "_forwardIfNeeded", "source 2992117347d6d0ef"),  # serMsg again, for a forwarded message
    Target(_T, "_next_XMIT_1", "source f25e978fdce5d56d"),  # amtSent = 0
    Target(_T, "_next_XMIT_2", "source 67f5dc3b7dc1ff39"),  # amtSent: the bytes written so far
))
READ_AHEAD = Patch("read_ahead", Kind.SPEED, "read-ahead", (
    Target(_T, "__init__", "source eabcf02e37125c2a"),  # _incomingEnvelopes: a list, oldest first
    Target(_T, "_processReceivedEnvelope", "source f2d1ceb3d5f36c56"),  # appends what was read for the actor
    Target(_T, "_check_indicators", "source d21a89c2b1d05726"),
    Target(_T, "_acceptNewIncoming", "source eb6c9359870cc547"),
    Target(_T, "_runWithExpiry", "source 5a6c512c48e9fd0a"),  # hands them over, oldest first
    Target(_transport, "ReceiveEnvelope", "source 9446e0dc79ddcbf9"),  # .message
))
# Without it a client could report a request delivered that never was, or wait 70 s on a dead supervisor.
CLIENT_SENDS = Patch("client_sends", Kind.ROBUSTNESS, "client-sends", (
    Target(_system.systemBase, "_run_transport", "source f9e3585d6abaeff2"),  # None when another thread runs it
    Target(_wakeup.wakeupTransportBase, "run", "source 25ade8f9a7ec4b0d"),  # transmit-only: the count left
    Target(_T, "scheduleTransmit", "source d967b8d19ac0f963"),
    Target(_T, "_next_XMIT_1", "source f25e978fdce5d56d"),  # a refused connect ends the intent in there
    Target(_T, "_finishIntent", "source bd2b2135d3e1a7f3"),  # ended intents wait in _finished_intents
    Target(_T, "_runWithExpiry", "source 5a6c512c48e9fd0a"),  # which its loop hands to tx_done
    Target(_T, "__init__", "source eabcf02e37125c2a"),
    Target(_INTENT, "__init__", "source 40cd9b467a3bd968"),  # retryPeriod, maxPeriod
    Target(_INTENT, "tx_done", "source 69a999c7abbc56ee"),
))
READERS = (ARRIVED_ACKS, SENT_CALLBACKS, WRITTEN_WHOLE, READ_AHEAD, CLIENT_SENDS)
