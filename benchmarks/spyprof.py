"""One actor process sampled by py-spy during a run, split by part and by handler (issue 33).

``recording(pid, path)`` runs ``py-spy record`` on one process while open (nothing when py-spy is not
installed); ``split(path)`` reads its collapsed stacks.  Samples whose innermost frame is the poll of
Thespian's loop, or a worker's simulated model latency, are the wait (or the wait for a core after it)
and are left out.  Each other sample goes to the innermost frame that names a part, and to the handler
it is in: the supervisor's steps, else the actor's ``receiveMsg_*`` or a send's delivery callback.
docs/performance.md, "Issue 33: the supervisor's profile" and "Issue 33: waiting, outside the supervisor".
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
WAITS = (POLL, "_simulated_latency ")  # innermost frames that are a wait: the poll, a worker's [cognition] latency
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
    ("the actor's own code (actors/, pegasus/)", r"actors/(?!wire/)|pegasus/"),
    ("Thespian loop and transport", r"thespian|actors/wire"),
)
HANDLER = re.compile(r"^Supervisor\._(handle|batch|flush) ")
RECEIVE = re.compile(r"^\w+\.receiveMsg_\w+ |^ResultCallback\.resultCallback ")  # another actor's handler


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
    """The handler a sample is in: the supervisor's frame below ``_handle``, or the commit's/sends' step; another
    actor's outermost ``receiveMsg_*``, or a send's delivery callback (a worker's answer-left, a report batch's)."""
    for index, frame in enumerate(frames):
        found = HANDLER.match(frame)
        if found:
            below = frames[index + 1].split(" (")[0] if index + 1 < len(frames) else ""
            return below if found.group(1) == "handle" else f"{frame.split(' (')[0]} > {below}"
        if RECEIVE.match(frame):
            name = frame.split(" (")[0]
            return "delivery callbacks" if name.startswith("ResultCallback.") else name
    return "outside handlers (receive, MAC, unpickle, acks)"


def split(path: Path) -> dict[str, Any]:
    """Busy samples of the actor's loop, and each part's and handler's share of them."""
    parts: Counter[str] = Counter()
    handlers: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        loops = [index for index, frame in enumerate(frames) if frame.startswith(LOOP)]
        if not count.isdigit() or not loops:
            continue
        frames = frames[loops[-1]:]  # a forked actor's stack begins with its parent's loop: its own is the last
        if frames[-1].startswith(WAITS):
            continue
        parts[_part(frames)] += int(count)
        handlers[_handler(frames)] += int(count)
    busy = sum(parts.values())
    share = (lambda counts: {k: round(n / busy, 3) for k, n in counts.most_common()} if busy else {})
    return {"busy_samples": busy, "parts": share(parts), "handlers": share(handlers)}
