"""The suite under load: two CPU spinners beside ``python -m pytest -q -n 4`` (issue 30).

    python -m tests.load                  # the whole suite, as .ci/run runs it
    python -m tests.load tests/integration/test_cli_run.py -x   # other pytest arguments instead of the default

Each spinner is a process that burns one core in a busy loop until it is ended or ``SPIN_MAX_S``
passes (so none outlives a killed run); both are ended in a ``finally``, by pid.  The suite must pass
like this: a test that fails here waited for a guess or asserted a time.  Prints the wall time and
the load average at the end; exits with pytest's status.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

SPINNERS = 2
SPIN_MAX_S = 45 * 60.0  # longer than a loaded run takes (~15 min); a bound, so a spinner never lingers
DEFAULT_ARGS = ["-q", "-n", "4"]


def spin(until: float) -> None:
    """Burn one core until the monotonic time ``until``."""
    while time.monotonic() < until:
        for _ in range(100_000):
            pass


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated run still ends its spinners
    until = time.monotonic() + SPIN_MAX_S
    spinners = [multiprocessing.get_context("fork").Process(target=spin, args=(until,), daemon=True)
                for _ in range(SPINNERS)]
    for spinner in spinners:
        spinner.start()
    print(f"load: {SPINNERS} busy loops (pids {', '.join(str(s.pid) for s in spinners)}) beside pytest", flush=True)
    began = time.monotonic()
    try:
        status = subprocess.call([sys.executable, "-m", "pytest", *(argv or DEFAULT_ARGS)])
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()
    minutes, seconds = divmod(time.monotonic() - began, 60)
    print(f"load: pytest exited {status} after {int(minutes)} min {seconds:.0f} s under {SPINNERS} busy loops; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
