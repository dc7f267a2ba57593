"""``python -m benchmarks [--quick] [--only NAME] [--json PATH] [--plots DIR [--from RUN.json]]``: run the
scenarios, print a table, write JSON (and PNG charts: ``benchmarks/charts.py``; with ``--from``, of a run
already written, without running anything).

Each scenario runs real Pegasus systems (multiprocTCPBase, a free 127.0.0.1
port, a temporary state directory), always shut down, even on failure.  The
figures are printed and written, never asserted as time limits: the exit
status is 0 when every scenario ran (targets met or not), 1 when one raised.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import machine

# Each scenario's module by the name it runs under, imported only when it runs: a run of one (``--only``,
# as each quick test does) loads that one alone, not the imports of the other fifteen.
SCENARIOS = {"hop": "hop", "pool": "pool", "scale": "scale", "checkpoint": "checkpoint", "recovery": "recovery",
             "baseline": "compare", "streaming": "streaming", "mcp": "mcp", "inflight": "inflight", "http": "http",
             "fanout": "fanout", "retrieval": "retrieval", "vectors": "vectors", "stops": "stops", "cli": "cli",
             "cpu": "cpusplit"}
# Run only when named (--only): hosts needs root to make network namespaces; realmodel takes minutes of a
# real model's CPU (and skips, saying why, without llama-cpp-python and SmolLM2).
OPT_IN = {"hosts": "hosts", "realmodel": "realmodel"}


def scenario(name: str) -> ModuleType:
    """The module of the scenario ``name`` (a key of SCENARIOS or OPT_IN), imported now."""
    return importlib.import_module(f"benchmarks.{({**SCENARIOS, **OPT_IN})[name]}")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


def table(results: dict[str, Any]) -> str:
    rows = [("scenario", "metric", "value", "unit", "target", "met")]
    for name, result in results.items():
        if "error" in result:
            rows.append((name, "ERROR", result["error"].splitlines()[-1][:80], "", "", ""))
            continue
        for row in result["checks"]:
            met = "" if row["met"] is None else ("yes" if row["met"] else "NO")
            rows.append((name, row["metric"], _format(row["value"]), row["unit"], row["target"] or "", met))
        rows.append((name, "(scenario wall time)", _format(result["wall_s"]), "s", "", ""))
        if "machine_speed" in result:
            rows.append((name, "(machine speed just before: burn loop, higher is faster)",
                         _format(result["machine_speed"]), "M/s", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) if i != 2 else cell.rjust(width)
                               for i, (cell, width) in enumerate(zip(row, widths))).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every scenario small enough for CI (< 1 minute)")
    parser.add_argument("--only", action="append", choices=sorted({**SCENARIOS, **OPT_IN}), metavar="NAME",
                        help=f"run only this scenario (repeatable): {', '.join(SCENARIOS)}; "
                             f"only when named: {', '.join(OPT_IN)}")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures and the machine here")
    parser.add_argument("--plots", type=Path, metavar="DIR", help="write PNG charts of the run in DIR")
    parser.add_argument("--from", dest="source", type=Path, metavar="RUN.json",
                        help="with --plots: chart this run (a --json file) instead of running the scenarios")
    args = parser.parse_args(argv)
    if args.source is not None:
        if args.plots is None:
            parser.error("--from needs --plots DIR")
        return plots(json.loads(args.source.read_text(encoding="utf-8")), args.plots)
    names = args.only or list(SCENARIOS)
    report: dict[str, Any] = {"mode": "quick" if args.quick else "full", "machine": machine.describe(),
                              "scenarios": {}}
    print(f"Pegasus benchmarks ({report['mode']}) on {machine.one_line(report['machine'])}", flush=True)
    failed = False
    began = time.perf_counter()
    for name in names:
        print(f"-- {name} ...", flush=True)
        speed = machine.speed()
        start = time.perf_counter()
        try:
            result = scenario(name).run(args.quick)
        except Exception:  # noqa: BLE001 - report it, run the other scenarios
            failed = True
            result = {"error": traceback.format_exc()}
            print(result["error"], file=sys.stderr, flush=True)
        result["wall_s"] = round(time.perf_counter() - start, 3)
        result["machine_speed"] = speed
        report["scenarios"][name] = result
        if args.json:  # after every scenario: a long run that dies keeps what it measured
            args.json.write_text(json.dumps(report, indent=2, default=str))
    report["wall_s"] = round(time.perf_counter() - began, 3)
    report["machine"]["load_average_end"] = machine.load_average()
    print()
    print(table(report["scenarios"]))
    notes = [note for result in report["scenarios"].values() for note in result.get("notes", [])]
    if notes:
        print("\nDefinitions:")
        for note in notes:
            print(f"  * {note}")
    print(f"\ntotal wall time {report['wall_s']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {args.json}")
    if args.plots:
        plots(report, args.plots)
    return 1 if failed else 0


def plots(report: dict[str, Any], directory: Path) -> int:
    from benchmarks import charts  # noqa: PLC0415 - matplotlib only when charts are asked for

    written = charts.write(report, directory)
    print(f"charts written: {', '.join(str(path) for path in written) or 'none (no scenario with figures)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
