"""Bounds of the numbers that become timers: checked at the door (``seconds``), clamped in the core (``timer_s``).

A wait or a deadline given by a caller (``Client.wait(timeout=...)``, ``pegasus run --timeout``) is
refused unless it is a finite number within its range, naming the parameter.  A delay a core hands
to a carrier as a timer (Thespian's ``wakeupAfter`` takes a ``timedelta``, its ``select`` a C
time) is clamped to ``[0, MAX_TIMER_S]``: a value that got past every door still cannot raise
``OverflowError`` in an actor.  Pure: no actors, no I/O.
"""

from __future__ import annotations

import math

from pegasus.errors import InvalidRequest

MAX_WAIT_S = 30 * 86400.0  # a caller's wait: a month at most
MAX_TIMER_S = 7 * 86400.0  # a timer armed by a core: re-armed when it fires early, so a week is plenty


def seconds(value: float | str, name: str, *, minimum: float = 0.0, maximum: float = MAX_WAIT_S,
            inclusive: bool = False, forever: bool = False) -> float:
    """``value`` as seconds when it is a finite number above ``minimum`` (or equal, ``inclusive``) and at
    most ``maximum`` (or, ``forever``, infinity: no deadline); else InvalidRequest naming ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidRequest(f"{name}: {value!r:.40} is not a number of seconds", name) from None
    if forever and number == math.inf:
        return number
    low = number >= minimum if inclusive else number > minimum
    if not (math.isfinite(number) and low and number <= maximum):
        bound = ">=" if inclusive else ">"
        raise InvalidRequest(f"{name}: {value!r:.40} seconds is out of range (a finite number {bound} {minimum:g} "
                             f"and <= {maximum:.0f})", name)
    return number


def timer_s(delay: float) -> float:
    """A delay a timer can be armed with: within ``[0, MAX_TIMER_S]`` (not a number: 0, fire at once)."""
    if not delay > 0:  # negative, zero or nan
        return 0.0
    return MAX_TIMER_S if delay >= MAX_TIMER_S else float(delay)  # compared first: float(10**400) raises
