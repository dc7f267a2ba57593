"""A convention member that stops checking in is noticed in seconds, not minutes.

Configuration, not code: Thespian reads its convention periods from the environment at import
and uses the module globals at each check, so this sets both (before any admin is forked).
Without it a dead member's tasks wait for Thespian's defaults.  docs/thespian-patches.md#convention-timing.
"""

from __future__ import annotations

import os
from datetime import timedelta

from thespian.system.admin import convention as _convention

from actors.wire.thespian_patches.base import Kind, Patch, Target

_PERIOD = Target(_convention, "CONVENTION_REREGISTRATION_PERIOD", "value")
_MISS_MAX = Target(_convention, "CONVENTION_REGISTRATION_MISS_MAX", "value")
_RESTART = Target(_convention, "CONVENTION_RESTART_PERIOD", "value")
PATCH = Patch("convention_timing", Kind.ROBUSTNESS, "convention-timing", (
    _PERIOD, _MISS_MAX, _RESTART,
    # every reader of the three globals (at each check, not a copy made at import) ...
    Target(_convention, "PreRegistration", "source 9dbb562dfd05c21f"),
    Target(_convention, "ConventionMemberData", "source aa24ff15d7d5afaa"),
    Target(_convention, "LocalConventionState", "source e45f2e81cdd38ac4"),
    # ... and how a process importing Thespian later reads the environment set here
    Target(_convention, "getenvdef", "source 758b9f9dd634e075"),
    Target(_convention, "str_to_timedelta", "source 8d5c169a97518e68"),
))


def _minutes_seconds(seconds: float) -> str:
    """Thespian's ``str_to_timedelta`` format: "M:S", whole seconds."""
    whole = max(1, round(seconds))
    return f"{whole // 60}:{whole % 60}"


def install(reregistration_period_s: float, registration_miss_max: int, restart_period_s: float) -> None:
    """Thespian's member failure detection for this process and its forks."""
    _PERIOD.replace(timedelta(seconds=reregistration_period_s), PATCH.name)
    _MISS_MAX.replace(int(registration_miss_max), PATCH.name)
    _RESTART.replace(timedelta(seconds=restart_period_s), PATCH.name)
    os.environ["CONVENTION_REREGISTRATION_PERIOD"] = _minutes_seconds(reregistration_period_s)
    os.environ["CONVENTION_REGISTRATION_MISS_MAX"] = str(int(registration_miss_max))
    os.environ["CONVENTION_RESTART_PERIOD"] = _minutes_seconds(restart_period_s)
