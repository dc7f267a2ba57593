"""Everything Pegasus changes in Thespian, one module per patch, and the check that they still apply.

Pegasus is written against ``thespian==4.0.1`` (pinned in setup.cfg) and patches its internals:
``security/`` (bind address, frame authentication and its size limit, private files, Thespian's
log) and ``speed/`` (poll selector, deferred descriptions, own stack chunk, whole messages,
quick idle checks, fresh retry, convention timing, logger restart).  ``install`` checks them first
(``check``): a security patch that cannot apply refuses the start (``PatchRefused``), a speed
patch that cannot apply is left out with one warning line.  Everything is per process and
inherited by every actor forked from it.  Each patch: docs/thespian-patches.md.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from actors.thespian_patches.base import DOCS, PINNED, Kind, Patch, installed_version
from actors.thespian_patches.security import bind_address, frame_auth, private_files, thespian_log
from actors.thespian_patches.speed import (convention_timing, deferred_descriptions, fresh_retry, logger_restart,
                                           own_stack_chunk, poll_selector, quick_idle_checks, whole_messages)
from pegasus.errors import PegasusError

SECURITY = (bind_address, frame_auth, private_files, thespian_log)
SPEED = (poll_selector, deferred_descriptions, own_stack_chunk, whole_messages, quick_idle_checks, fresh_retry,
         convention_timing, logger_restart)
PATCHES: tuple[Patch, ...] = tuple(module.PATCH for module in (*SECURITY, *SPEED))
UPGRADING = f"{DOCS}#moving-to-another-thespian"

__all__ = ["PATCHES", "PINNED", "BindConflict", "Checked", "PatchRefused", "check", "install", "verify"]
BindConflict = bind_address.BindConflict


class PatchRefused(PegasusError):
    """A security patch cannot apply to the installed Thespian: Pegasus does not start."""


@dataclass(frozen=True)
class Checked:
    """Which patches apply here, and why each of the others does not."""

    version: str | None
    problems: dict[str, str] = field(default_factory=dict)  # patch name -> reason

    def applies(self, patch: Patch) -> bool:
        return patch.name not in self.problems

    def refused(self) -> list[Patch]:
        return [p for p in PATCHES if p.kind is Kind.SECURITY and not self.applies(p)]

    def skipped(self) -> list[Patch]:
        return [p for p in PATCHES if p.kind is Kind.SPEED and not self.applies(p)]


def check() -> Checked:
    """Which patches can apply to the installed Thespian (not installing any)."""
    version = installed_version()
    problems = {patch.name: reason for patch in PATCHES if (reason := patch.problem(version))}
    return Checked(version, problems)


def refusal(checked: Checked) -> PatchRefused | None:
    """The error to refuse the start with, naming each security patch that cannot apply, or None."""
    refused = checked.refused()
    if not refused:
        return None
    names = ("patches " if len(refused) > 1 else "patch ") + ", ".join(p.name for p in refused)
    if checked.version != PINNED:
        why, where = f"Thespian {checked.version or '(version unknown)'} is installed, not {PINNED}", UPGRADING
    else:
        why, where = checked.problems[refused[0].name], refused[0].where
    return PatchRefused(f"Thespian security {names} cannot apply: {why}; Pegasus needs thespian=={PINNED} "
                        f"(pip install thespian=={PINNED}; see {where})")


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
    """``check``, then PatchRefused when a security patch cannot apply, or a warning line (once per
    process) for each speed patch that cannot."""
    checked = check()
    refused = refusal(checked)
    if refused is not None:
        raise refused
    _warn_once(checked)
    return checked


def install(*, bind: str, advertise: str | None, key: bytes, max_frame_bytes: int, state_dir: Path, logs_dir: Path,
            thesplog_level: str, convention: tuple[float, int, float]) -> Checked:
    """``verify``, then install every patch that applies, in this process (and so in everything it forks).

    Raises PatchRefused (before installing anything) when a security patch cannot apply, and
    BindConflict when this process already binds to another address.  ``convention``: the
    reregistration period (s), the check-ins a member may miss, the restart period (s).
    """
    checked = verify()
    bind_address.install(bind, advertise)
    frame_auth.install(key, max_frame_bytes, state_dir)
    private_files.install()
    thespian_log.install(logs_dir, thesplog_level)
    if checked.applies(convention_timing.PATCH):
        convention_timing.install(*convention)
    for module in (poll_selector, deferred_descriptions, own_stack_chunk, whole_messages, quick_idle_checks,
                   fresh_retry, logger_restart):
        if checked.applies(module.PATCH):
            module.install()
    return checked
