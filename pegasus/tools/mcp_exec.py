"""Run an MCP server so that it dies with the process that started it (Linux): ``python -I -S
mcp_exec.py PARENT_PID COMMAND ARGS...`` sets PR_SET_PDEATHSIG, checks that PARENT_PID is still its
parent, then execs COMMAND (the same pid, process group and pipes).

Why: the SDK starts a server in a new session and ends it only when its session is closed; a
host process SIGKILLed (its system stopped or dead) would leave it running forever, read by
nobody.  The SDK takes no ``preexec_fn``, so this runs between the fork and the server's exec.
Run by path with only the standard library: nothing of Pegasus is imported.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def main(argv: list[str]) -> None:
    parent, command = int(argv[1]), argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the host ended before the death signal was set
        os._exit(1)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot run {command[0]!r}: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
