"""Thespian's internal log goes to ``<state dir>/logs/thespian.log``, private, not to ``$TMPDIR``.

Configuration, not code: the environment and Thespian's cached module globals.  The log holds
tracebacks and, at DEBUG, message contents: a security patch.  docs/thespian-patches.md#thespian-log.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from thespian.system import utilis as _utilis

from actors.wire.thespian_patches.base import Kind, Patch, Target
from pegasus.files import open_private

PATCH = Patch("thespian_log", Kind.SECURITY, "thespian-log", (
    Target(_utilis, "_thesplog_control_settings", "value"),
    Target(_utilis, "_thesplog_file", "value"),
    Target(_utilis, "_thesplog_old_file", "value"),
    Target(_utilis, "thesplog_control", "source f312d8429356b700"),
    Target(_utilis, "thesplog", "source 36ec828f54673d4e"),  # reads the three settings above at each call
))


def install(logs_dir: Path, threshold: str = "WARNING", max_size: int = 1024 * 1024) -> Path:
    """Send Thespian's internal log to logs_dir/thespian.log (this process and its forks); returns the path."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    path = logs_dir / "thespian.log"
    os.close(open_private(path))  # whichever process writes first, the file is private
    os.environ["THESPLOG_FILE"] = str(path)
    os.environ["THESPLOG_FILE_MAXSIZE"] = str(max_size)
    os.environ["THESPLOG_THRESHOLD"] = threshold
    level = _utilis.str_to_loglevel(threshold)
    _utilis.thesplog_control(logging.WARNING if level is None else level, False, max_size)
    _utilis._thesplog_file = str(path)
    _utilis._thesplog_old_file = str(path) + ".old"
    return path
