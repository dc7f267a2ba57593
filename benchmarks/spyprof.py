"""The supervisor's whole process sampled by py-spy during a run, split by part and by handler (issue 33).

``recording(pid, path)`` runs ``py-spy record`` on one process while open (nothing when py-spy is not
installed); ``split(path)`` reads its collapsed stacks.  Samples whose innermost frame is the poll of
Thespian's loop are the wait (or the wait for a core after it) and are left out.  Each other sample
goes to the innermost frame that names a part.  docs/performance.md, "Issue 33: the supervisor's profile".
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RATE_HZ = 500
POLL = "PollSet.select"  # Thespian's poll (actors/wire/thespian_patches/speed/poll_selector.py)
LOOP = "wakeupTransportBase.run"  # below it: the actor's life; above: its start-up
PARTS = (  # (part, pattern): the innermost frame that matches names the sample's part
    ("pickle, msgpack", r"pickle|_serialize|packb|unpackb|^loads \(|^dumps \("),
    ("structlog", r"structlog|pegasus/logs|logging/"),
    ("metrics, telemetry", r"metrics|telemetry|prometheus|opentelemetry"),
    ("pydantic", r"pydantic"),
    ("SQLite COMMIT", r"^Database\._end "),
    ("store", r"pegasus/store/|pegasus/memory/store|sqlite3"),
    ("memory, not its store", r"pegasus/memory|actors/supervisor/memory"),
    ("admission core", r"pegasus/admission"),
    ("frames: MAC, unpickle", r"frame_auth|whole_messages|wire/frames"),
    ("supervisor's own code", r"actors/supervisor|pegasus/"),
    ("Thespian loop and transport", r"thespian|actors/wire"),
)
HANDLER = re.compile(r"^Supervisor\._(handle|batch|flush) ")


@contextlib.contextmanager
def recording(pid: int, path: Path) -> Iterator[bool]:
    """py-spy samples ``pid`` into ``path`` (collapsed stacks) while open; yields whether it runs."""
    spy = shutil.which("py-spy")
    if spy is None:
        yield False
        return
    process = subprocess.Popen([spy, "record", "--pid", str(pid), "-r", str(RATE_HZ), "--function", "-f", "raw",
                                "-o", str(path), "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the run begins
    try:
        yield True
    finally:
        process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _part(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if re.search(pattern, frame):
                return name
    return "other"


def _handler(frames: list[str]) -> str:
    """The supervisor's handler a sample is in: the frame below ``_handle``, or the commit's/sends' step."""
    for index, frame in enumerate(frames):
        found = HANDLER.match(frame)
        if found:
            below = frames[index + 1].split(" (")[0] if index + 1 < len(frames) else ""
            return below if found.group(1) == "handle" else f"{frame.split(' (')[0]} > {below}"
    return "outside handlers (receive, MAC, unpickle, acks)"


def split(path: Path) -> dict[str, Any]:
    """Busy samples of the actor's loop, and each part's and handler's share of them."""
    parts: Counter[str] = Counter()
    handlers: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or not any(frame.startswith(LOOP) for frame in frames):
            continue
        if frames[-1].startswith(POLL):
            continue
        parts[_part(frames)] += int(count)
        handlers[_handler(frames)] += int(count)
    busy = sum(parts.values())
    share = (lambda counts: {k: round(n / busy, 3) for k, n in counts.most_common()} if busy else {})
    return {"busy_samples": busy, "parts": share(parts), "handlers": share(handlers)}
