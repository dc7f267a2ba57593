"""Everything Pegasus changes in Thespian, one module per patch, and the check that they still apply.

Written against ``thespian==4.0.1`` (pinned in setup.cfg): ``security/``, ``robustness/`` and
``speed/`` patches, and ``readers`` (internals a carrier uses unpatched, checked as their kind says).
``install`` checks them first (``check``): a security or robustness patch that cannot apply refuses
the start (``PatchRefused``), a speed patch that cannot is left out with one warning line.  Per
process, inherited by every actor forked from it.  Each patch: docs/thespian-patches.md.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from actors.wire.thespian_patches import readers
from actors.wire.thespian_patches.base import DOCS, PINNED, Kind, Patch, installed_version
from actors.wire.thespian_patches.robustness import child_exits, convention_timing, fresh_retry, logger_restart, peer_slots
from actors.wire.thespian_patches.security import bind_address, frame_auth, private_files, thespian_log
from actors.wire.thespian_patches.speed import (compact_addresses, deferred_descriptions, due_expiry_scan, own_stack_chunk,
                                                poll_selector, quick_idle_checks, quiet_admin, quiet_transmits,
                                                whole_messages)
from pegasus.errors import PegasusError

SECURITY = (bind_address, frame_auth, private_files, thespian_log)
ROBUSTNESS = (fresh_retry, convention_timing, logger_restart, child_exits, peer_slots)
SPEED = (poll_selector, deferred_descriptions, own_stack_chunk, whole_messages, quick_idle_checks, due_expiry_scan,
         quiet_admin, compact_addresses, quiet_transmits)
PATCHES: tuple[Patch, ...] = (*(module.PATCH for module in (*SECURITY, *ROBUSTNESS, *SPEED)), *readers.READERS)
UPGRADING = f"{DOCS}#moving-to-another-thespian"

__all__ = ["PATCHES", "PINNED", "BindConflict", "Checked", "PatchRefused", "check", "install", "verify"]
BindConflict = bind_address.BindConflict


class PatchRefused(PegasusError):
    """A security or robustness patch cannot apply to the installed Thespian: Pegasus does not start."""


@dataclass(frozen=True)
class Checked:
    """Which patches apply here, and why each of the others does not."""

    version: str | None
    problems: dict[str, str] = field(default_factory=dict)  # patch name -> reason

    def applies(self, patch: Patch) -> bool:
        return patch.name not in self.problems

    def refused(self) -> list[Patch]:
        return [p for p in PATCHES if p.kind.required and not self.applies(p)]

    def skipped(self) -> list[Patch]:
        return [p for p in PATCHES if not p.kind.required and not self.applies(p)]


def check() -> Checked:
    """Which patches can apply to the installed Thespian (not installing any)."""
    version = installed_version()
    problems = {patch.name: reason for patch in PATCHES if (reason := patch.problem(version))}
    return Checked(version, problems)


def refusal(checked: Checked) -> PatchRefused | None:
    """The error to refuse the start with, naming each security or robustness patch that cannot apply
    and what differs, or None."""
    refused = checked.refused()
    if not refused:
        return None
    if checked.version != PINNED:
        return PatchRefused(f"Thespian {_named(refused)} cannot apply: Thespian {checked.version or '(version unknown)'} "
                            f"is installed, not {PINNED}; Pegasus needs thespian=={PINNED} "
                            f"(pip install thespian=={PINNED}; see {UPGRADING})")
    if len(refused) == 1:
        why, where = checked.problems[refused[0].name], refused[0].where
    else:
        why, where = "; ".join(f"{p.name}: {checked.problems[p.name]}" for p in refused), UPGRADING
    return PatchRefused(f"Thespian {_named(refused)} cannot apply: {why}; Pegasus needs Thespian {PINNED}'s own "
                        f"code there (see {where})")


def _named(patches: list[Patch]) -> str:
    """``security patches a, b and robustness patch c``."""
    groups = []
    for kind in Kind:
        names = [p.name for p in patches if p.kind is kind]
        if names:
            groups.append(f"{kind.value} patch{'es' if len(names) > 1 else ''} {', '.join(names)}")
    return " and ".join(groups)


_warned: set[str] = set()
_lock = threading.Lock()


def _warn_once(checked: Checked) -> None:
    """One stderr line per speed patch left out, once per process."""
    for patch in checked.skipped():
        with _lock:
            if patch.name in _warned:
                continue
            _warned.add(patch.name)
        print(f"pegasus: warning: running without the Thespian speed patch {patch.name}: "
              f"{checked.problems[patch.name]} (see {patch.where})", file=sys.stderr, flush=True)


def verify() -> Checked:
    """``check``, then PatchRefused when a security or robustness patch cannot apply, or a warning line
    (once per process) for each speed patch that cannot."""
    checked = check()
    refused = refusal(checked)
    if refused is not None:
        raise refused
    _warn_once(checked)
    return checked


def install(*, bind: str, advertise: str | None, key: bytes, max_frame_bytes: int, state_dir: Path, logs_dir: Path,
            thesplog_level: str, convention: tuple[float, int, float]) -> Checked:
    """``verify``, then install every patch that applies, in this process (and so in everything it forks).

    Raises PatchRefused (before installing anything) when a security or robustness patch cannot
    apply, and BindConflict when this process already binds to another address.  ``convention``:
    the reregistration period (s), the check-ins a member may miss, the restart period (s).
    """
    checked = verify()
    bind_address.install(bind, advertise)
    frame_auth.install(key, max_frame_bytes, state_dir)
    private_files.install()
    thespian_log.install(logs_dir, thesplog_level)
    fresh_retry.install()
    convention_timing.install(*convention)
    logger_restart.install()
    child_exits.install()
    peer_slots.install()
    for module in SPEED:
        if checked.applies(module.PATCH):
            module.install()
    return checked
