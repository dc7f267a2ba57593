"""The gateway keeper: the actor that runs the HTTP gateway process, and starts it again when it dies.

Created by the guardian when ``[http] enabled``.  The gateway is a separate program (uvicorn and
the app, ``actors.client.gateway``) started from here, so it descends from the system's lock holders:
``pegasus stop`` ends it with the rest.  It dies with this actor (``PR_SET_PDEATHSIG`` set before it
execs), which dies with the guardian.  A gateway that exits is started again as ``GATEWAY``'s spec says
(``pegasus.supervision``): its pidfd is watched (Thespian's ``ThespianWatch``), so an idle keeper
does not wake (issue 33).  Its output goes to ``logs/gateway.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from thespian.actors import ActorExitRequest, ThespianWatch, WakeupMessage, WatchMessage

from actors import messages as m
from actors.boundary import Boundary
from actors.messages.gateway import HOME_ENV, RESTARTS_ENV
from actors.runtime import procs, titles
from pegasus import files, logs
from pegasus.guardian import KEEPER, SPECS
from pegasus.supervision import Alarm, Exited, StartAgain, Started, Supervision

CHECK_S = 0.5  # how soon a dead gateway is noticed where it has no pidfd to watch
STOP_GRACE_S = 2.0
_PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the tree holding actors/: the gateway imports this code
GATEWAY = "gateway"
# The guardian's for the keeper itself: at once, then 1 s doubling to 30 s (over again after a minute up);
# more than 5 deaths a minute: every 30 s.
SPEC = SPECS[KEEPER]


class GatewayKeeper(Boundary):
    """See the module docstring."""

    error_event = "gateway_keeper_error"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.state_dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.pidfd: int | None = None  # readable once the gateway has exited
        self.supervision = Supervision({GATEWAY: SPEC})
        self.deaths = 0
        self.exiting = False
        self.log = logs.get("gateway")

    def receiveMsg_StartGateway(self, start: m.StartGateway, sender: Any) -> None:
        if self.state_dir is None:
            self.state_dir = Path(start.state_dir)
            titles.set_title("gateway keeper")
            self._start()

    def _start(self) -> None:
        assert self.state_dir is not None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        env[HOME_ENV] = str(self.state_dir)
        env[RESTARTS_ENV] = str(self.deaths)
        out = files.open_private(self.state_dir / "logs" / "gateway.log", os.O_WRONLY | os.O_APPEND)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-c", "from actors.client.gateway import main; main()"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True, cwd=self.state_dir, env=env,
                preexec_fn=procs.exec_dies_with_parent)  # noqa: PLW1509 - only a prctl, before exec
        finally:
            os.close(out)
        self.supervision.step(Started(GATEWAY, GATEWAY, time.monotonic()))
        self.log.info("gateway_started", pid=self.process.pid)
        try:
            self.pidfd = os.pidfd_open(self.process.pid)
        except OSError:  # no pidfd here: looked at every CHECK_S
            self.wakeupAfter(timedelta(seconds=CHECK_S), payload=m.GatewayCheck())

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        """Each message handled, then the gateway's pidfd watched again (Thespian watches what the last
        handler returned)."""
        super().receiveMessage(message, sender)
        return ThespianWatch([self.pidfd]) if self.pidfd is not None and not self.exiting else None

    def receiveMsg_WatchMessage(self, watch: WatchMessage, sender: Any) -> None:
        if self.pidfd is not None and self.pidfd in watch.ready:
            self._check()

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        check = wakeup.payload
        if not isinstance(check, m.GatewayCheck) or self.exiting or self.process is None:
            return
        if check.start:
            self._start()
            return
        self._check()

    def _check(self) -> None:
        """The gateway has exited (its pidfd readable), or a look where it has none: started again if it did."""
        if self.exiting or self.process is None:
            return
        status = self.process.poll()
        if status is None:
            if self.pidfd is None:
                self.wakeupAfter(timedelta(seconds=CHECK_S), payload=m.GatewayCheck())
            return
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        for command in self.supervision.step(Exited(GATEWAY, time.monotonic(), f"exit status {status}")):
            if isinstance(command, Alarm):
                self.log.error(f"{command.child}_crash_loop", deaths=command.deaths, period_s=command.period_s,
                               reason=command.reason)
            elif isinstance(command, StartAgain):
                self.deaths = command.deaths
                self.log.warning("gateway_died", status=status, restart_in_s=command.delay_s, deaths=command.deaths)
                self.wakeupAfter(timedelta(seconds=max(command.delay_s, 0.01)), payload=m.GatewayCheck(start=True))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.exiting = True
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)  # uvicorn closes its connections and exits
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(1.0)
