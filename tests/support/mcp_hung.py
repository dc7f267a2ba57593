"""An MCP server that never answers ``initialize``: it writes its pid to the file named by its
first argument (so a test can find every copy started), says so on stderr, and waits forever."""

import sys
import time

if len(sys.argv) > 1:
    with open(sys.argv[1], "a", encoding="utf-8") as pids:
        pids.write(f"{__import__('os').getpid()}\n")
sys.stderr.write("hung: never answering initialize\n")
sys.stderr.flush()
while True:
    time.sleep(3600)
