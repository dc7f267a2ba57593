"""An admin with no convention to keep waits for a message, not for a period.

Thespian's admin loop (``ConventioneerAdmin.run``) gives the transport at most one re-registration
period (3 s with Pegasus's convention timing), then checks the convention: 20 wake-ups a minute
of an idle system.  Alone (no member, and no leader but itself) nothing in that check can be
due, so the pass is unbounded; the first member's registration ends it, so that its check-ins
are counted from then on.  A member, or a leader with members, runs as before.
docs/thespian-patches.md#quiet-admin.
"""

from __future__ import annotations

import logging
from typing import Any

from thespian.system.admin import convention as _convention
from thespian.system.timing import ExpirationTimer, currentTime
from thespian.system.transport import Thespian__Run_Terminated
from thespian.system.utilis import thesplog

from actors.wire.thespian_patches.base import Kind, Patch, Target

_RUN = Target(_convention.ConventioneerAdmin, "run", "source 6cc67ff1c711bcb7")
PATCH = Patch("quiet_admin", Kind.SPEED, "quiet-admin", (
    _RUN,
    # what "alone" reads: the members and the leader, as the convention's own checks read them ...
    Target(_convention.LocalConventionState, "isConventionLeader", "source c88b38cea6b7bc8e"),
    Target(_convention.LocalConventionState, "check_convention", "source ea0ec393c725623a"),
    # ... and the handler whose result ends a pass (any false value)
    Target(_convention.ConventioneerAdmin, "h_ConventionRegister", "source 52d3cc032c9d1d83"),
))


def _alone(state: Any) -> bool:
    """No member to count and no leader to check in with: nothing of the convention can become due."""
    return len(state._conventionMembers) == 0 and state.isConventionLeader()


def _until_joined(admin: Any, envelope: Any) -> Any:
    """The admin's handler for an unbounded pass: a false result (ending the pass) once it is alone no more."""
    result = admin.handleIncoming(envelope)
    return False if result and not _alone(admin._cstate) else result


def _run(self: Any) -> None:
    """``ConventioneerAdmin.run``, the convention's bound on a pass left out while the admin is alone."""
    transport_continue: Any = True
    try:
        while not getattr(self, "shutdown_completed", False) and \
                not isinstance(transport_continue, Thespian__Run_Terminated):
            ct = currentTime()
            alone = _alone(self._cstate)
            delay = min(ExpirationTimer(None).view(ct) if alone else self._cstate.convention_inattention_delay(ct),
                        ExpirationTimer(None).view(ct) if self._hysteresisSender.delay.expired() else
                        self._hysteresisSender.delay)
            handler = (lambda envelope: _until_joined(self, envelope)) if alone else self.handleIncoming
            transport_continue = self.transport.run(handler, delay.remaining())
            self._performIO(self._cstate.check_convention())
            self._hysteresisSender.checkSends()
            self._remove_expired_sources()
    except Exception:  # noqa: BLE001 - Thespian's own: said in its log, then the admin ends
        import traceback
        thesplog("ActorAdmin uncaught exception: %s", traceback.format_exc(), level=logging.ERROR, exc_info=True)
    thesplog("Admin time to die", level=logging.DEBUG)


def install() -> None:
    """The admin's loop unbounded while it is alone."""
    _RUN.replace(_run, PATCH.name)
