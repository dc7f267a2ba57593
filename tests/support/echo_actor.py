"""A tiny actor for integration tests: importable by module path in every
process of a multiprocTCPBase system (classes in __main__ or in test files are
not importable by the admin's forked actors).

Requests are plain tuples/strings so no other test module must be imported:
- "pid"                -> the actor's process id
- ("spawn",)           -> address of a new child EchoActor
- ("log", text)        -> logs text at WARNING through `logging`, answers "logged"
- "selector"           -> the name of the selector class Thespian's TCP transport uses here
- "steps"              -> the names of Thespian's transport steps patched by actors/wire/thespian_patches/speed (whole_messages, quick_idle_checks)
- "stack"              -> the names of the functions on this actor's call stack
- "described"          -> the type name of what Thespian's ``TransmitIntent.identify()`` returns here
- anything else        -> echoed back
"""

from __future__ import annotations

import logging
import os
import sys

from thespian.actors import Actor, ActorExitRequest, ChildActorExited


class EchoActor(Actor):
    """Echoes, reports its pid, spawns children and logs on request."""

    def receiveMessage(self, message, sender):  # noqa: N802 - Thespian's name
        if isinstance(message, (ActorExitRequest, ChildActorExited)):
            return
        if message == "pid":
            self.send(sender, os.getpid())
        elif message == "selector":
            from thespian.system.transport import TCPTransport

            self.send(sender, TCPTransport.selectors.DefaultSelector.__name__)
        elif message == "steps":
            from thespian.system.transport.IPBase import IPActorAddress
            from thespian.system.transport.TCPTransport import IdleSocket
            from thespian.system.transport.TCPTransport import TCPTransport as T

            self.send(sender, [T._handleReadableIncoming.__name__, T._next_XMIT_2.__name__, T._next_XMIT_4.__name__,
                               IdleSocket.expired.__name__, IPActorAddress.__hash__.__name__])
        elif message == "stack":
            frame, names = sys._getframe(), []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            self.send(sender, names)
        elif message == "described":
            from thespian.system.transport import TransmitIntent

            self.send(sender, type(TransmitIntent(sender, "x").identify()).__name__)
        elif isinstance(message, tuple) and message[:1] == ("spawn",):
            self.send(sender, self.createActor(EchoActor))
        elif isinstance(message, tuple) and message[:1] == ("log",):
            logging.getLogger("tests.echo").warning("%s", message[1])
            self.send(sender, "logged")
        else:
            self.send(sender, message)
