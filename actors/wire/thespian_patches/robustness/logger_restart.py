"""An admin whose logger died starts a new one, on the same address, instead of dying itself.

Thespian's ``MultiProcReplicator.childDied`` reads ``self.logDefs`` where the admin keeps
``self.logdefs``: the ``AttributeError`` ends the admin.  This replaces the logger part of
``childDied``, at the pace ``pegasus.supervision`` decides.  docs/thespian-patches.md#logger-restart.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from thespian.system import logdirector as _logdirector
from thespian.system import multiprocCommon as _multiproc
from thespian.system.admin.adminCore import AdminCore as _AdminCore
from thespian.system.messages.convention import CONV_ADDR_IPV4_CAPABILITY
from thespian.system.transport.TCPTransport import TCPTransport as _TCPTransport
from thespian.system.utilis import thesplog

from actors.wire.thespian_patches.base import Kind, Patch, Target
from pegasus.supervision import Alarm, ChildSpec, Exceeded, Exited, Started, StartAgain, Supervision

_CHILD_DIED = Target(_multiproc.MultiProcReplicator, "childDied", "source b123adadb3c3c121")
_CONNECTED = Target(_multiproc.MultiProcReplicator, "h_LoggerConnected", "source f548487bdf17e700")
PATCH = Patch("logger_restart", Kind.ROBUSTNESS, "logger-restart", (
    _CHILD_DIED, _CONNECTED,
    Target(_AdminCore, "__init__", "source 6636125d95b5a61b"),  # keeps the logDefs as self.logdefs
    Target(_logdirector, "startupASLogger", "source 927620b7a7fdc3fa"),  # binds its endpoint, says LoggerConnected
    Target(_TCPTransport, "prepEndpoint", "source 01b550f3ddf816ed"),  # a TCP address given: that address
    Target(_TCPTransport, "__init__", "source eabcf02e37125c2a"),  # ... is bound (SO_REUSEADDR)
    Target(_TCPTransport, "childResetFileNumList", "source c6a607d8a66fd498"),
    Target(_multiproc, "ChildInfo", "source ca6e40fcba031fea"),
))
LOGGER = "logger"
SPEC = ChildSpec(intensity=5, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN, max_s=30.0)
_STATE = "_pegasus_logger_supervision"  # on the admin: its Supervision of the logger
_child_died = _CHILD_DIED.original
_logger_connected = _CONNECTED.original


def _supervision(admin: Any) -> Supervision:
    found = admin.__dict__.get(_STATE)
    if found is None:
        found = admin.__dict__[_STATE] = Supervision({LOGGER: SPEC})
        found.step(Started(LOGGER, LOGGER, time.monotonic()))  # the first logger, started with the admin
    return found


def child_died(self: Any) -> bool:
    """``MultiProcReplicator.childDied``, the dead logger started again by ``restart_logger``."""
    logproc = getattr(self, "asLogProc", None)
    if logproc and not hasattr(self, "_exiting") and getattr(self, "asLogger", None) is not None \
            and not self._checkChildLiveness(logproc):
        self.asLogProc = None  # Thespian's own restart (broken) is skipped: it sees no logger
        exitcode = getattr(logproc.childProc, "exitcode", None)
        for command in _supervision(self).step(Exited(LOGGER, time.monotonic(), reason=f"exit code {exitcode}")):
            if isinstance(command, StartAgain):
                try:
                    restart_logger(self, command.delay_s)
                except Exception as exc:  # noqa: BLE001 - a logger that cannot start must not end the admin
                    thesplog("Thespian logger could not be started again: %r", exc, level=logging.ERROR)
                    continue
                thesplog("Thespian logger died (%s, death %d): started again on %s in %.1fs", command.reason,
                         command.deaths, self.asLogger, command.delay_s, level=logging.WARNING)
            elif isinstance(command, Alarm):
                thesplog("Thespian logger died %d times within %.0fs (%s): started again every %.0fs",
                         command.deaths, command.period_s, command.reason, SPEC.max_s, level=logging.ERROR)
    return _child_died(self)


def restart_logger(admin: Any, delay_s: float) -> None:
    """A new logger process for ``admin``, on the address of the one that died, after ``delay_s``."""
    transport = admin.transport
    address = admin.asLogger  # the dead logger's TCP address: every actor's log forwarder sends there
    endpoint = transport.prepEndpoint(address, admin.capabilities)
    inherited = list(transport.childResetFileNumList())
    context = admin.mpcontext if admin.mpcontext else _multiproc.multiprocessing
    process = context.Process(target=_run_logger, name="ThespianLogger",
                              args=(delay_s, inherited, transport.myAddress, endpoint, admin.logdefs,
                                    transport.__class__, _aggregator(admin)))
    process.daemon = True
    process.start()
    admin.asLogProc = _multiproc.ChildInfo(address, "logger", process, None)


def _aggregator(admin: Any) -> Any:
    """Where this admin's logger forwards warnings: its convention leader (as ``_startLogger`` finds it)."""
    found = admin.capabilities.get(CONV_ADDR_IPV4_CAPABILITY, None)
    if not found:
        return None
    try:
        found = admin.transport.__class__.getAddressFromString(found[0] if isinstance(found, list) else found)
    except Exception:  # noqa: BLE001 - as Thespian: no aggregator
        return None
    return None if found == admin.transport.myAddress else found


def _run_logger(delay_s: float, inherited: list[int], admin_address: Any, endpoint: Any, log_defs: Any,
                transport_class: Any, aggregator: Any) -> None:
    """The new logger process: without the admin's sockets, after the pause, Thespian's logger."""
    for fd in inherited:
        try:
            os.close(fd)
        except OSError:
            pass
    if delay_s > 0:
        time.sleep(delay_s)
    _logdirector.startupASLogger(admin_address, endpoint, log_defs, transport_class, aggregator)


def logger_connected(self: Any, envelope: Any) -> bool:
    """``h_LoggerConnected``; from a restarted logger it only notes that it is up (the admin is running)."""
    supervision = self.__dict__.get(_STATE)
    if supervision is None:
        return _logger_connected(self, envelope)
    self.asLogger = envelope.sender  # the same address
    supervision.step(Started(LOGGER, LOGGER, time.monotonic()))
    return True


def install() -> None:
    """An admin whose logger died starts a new one on the same address."""
    _CHILD_DIED.replace(child_died, PATCH.name)
    _CONNECTED.replace(logger_connected, PATCH.name)
