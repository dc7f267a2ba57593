"""The benchmarks' one chart writer (matplotlib, its Agg backend: no display).

``python -m benchmarks --plots DIR`` (``--from RUN.json``: a run already written): the hop latency
distribution, pool efficiency against N, throughput and memory against task count, Pegasus against the
baseline, drawn from the run's JSON alone (docs/performance.md's, from docs/benchmark-run.json); a scenario
the run lacks gives none.  ``python -m benchmarks.charts BENCH.json[=label] ... OUT.svg``: the inflight
scenario of several runs in one picture (docs/inflight.svg).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.inflight import NAME as INFLIGHT, TARGETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@functools.cache
def _pyplot() -> Any:
    """matplotlib's pyplot on its Agg backend, imported when a chart is drawn: a run with nothing to chart
    (most ``--only`` runs) and a process that only names the charts never load it."""
    import matplotlib  # noqa: PLC0415 - see the docstring

    matplotlib.use("Agg")  # before pyplot: files only, never a display
    matplotlib.rcParams["svg.fonttype"] = "none"  # an SVG's words stay text (searchable, and smaller)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


MACHINES = ("classic", "reason_act")
PERCENTILES = ("p50_ms", "mean_ms", "p99_ms", "max_ms")


def _figures(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    result = report.get("scenarios", {}).get(name) or {}
    return None if "error" in result else result.get("figures")


def hop_chart(report: dict[str, Any]) -> Figure | None:
    """Each machine's hops as a histogram (a run that kept its samples), else as percentiles beside
    Thespian's floor (bare actors, the same sends)."""
    hop = _figures(report, "hop")
    if not hop:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    samples = {m: hop[m]["hops_ms"] for m in MACHINES if hop.get(m, {}).get("hops_ms")}
    if samples:
        ax.hist(list(samples.values()), bins=40, label=list(samples), stacked=False, alpha=0.8)
        ax.set_xlabel("hop (ms): a stage's end to the next stage's start")
        ax.set_ylabel("hops")
    else:
        rows = {m: hop[m]["hop"] for m in MACHINES if m in hop}
        if hop.get("thespian_floor_hop"):
            rows["Thespian floor"] = hop["thespian_floor_hop"]["hop"]
        width = 0.8 / max(len(rows), 1)
        for n, (label, row) in enumerate(rows.items()):
            ax.bar([i + n * width for i in range(len(PERCENTILES))], [row[p] for p in PERCENTILES], width,
                   label=label)
        ax.set_xticks([i + width * (len(rows) - 1) / 2 for i in range(len(PERCENTILES))],
                      [p.removesuffix("_ms") for p in PERCENTILES])
        ax.set_ylabel("hop (ms)")
        ax.set_yscale("log")
    ax.set_title(f"Hop latency ({report.get('mode', '?')} run)")
    ax.legend()
    return fig


def pool_chart(report: dict[str, Any]) -> Figure | None:
    """Pool efficiency (throughput over N / stage latency) and throughput against the bound, by N workers."""
    pool = _figures(report, "pool")
    if not pool or not pool.get("runs"):
        return None
    runs = sorted(pool["runs"], key=lambda run: run["n"])
    n = [run["n"] for run in runs]
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(10, 4))
    left.plot(n, [run["efficiency"] for run in runs], "o-")
    left.set_ylim(0, 1.05)
    left.set_xlabel("llm workers (N)")
    left.set_ylabel("efficiency (throughput / bound)")
    left.set_title("Pool efficiency")
    right.plot(n, [run["throughput_per_s"] for run in runs], "o-", label="measured")
    right.plot(n, [run["bound_per_s"] for run in runs], "--", label="bound: N / stage latency")
    right.set_xlabel("llm workers (N)")
    right.set_ylabel("stages per second")
    right.set_title(f"Throughput ({pool.get('latency_ms', '?')} ms stages)")
    right.legend()
    fig.tight_layout()
    return fig


def _load_series(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """label -> runs with tasks, tasks_per_s and peak_pss_mib, by task count (completed runs only)."""
    out: dict[str, list[dict[str, Any]]] = {}
    scale = _figures(report, "scale")
    if scale:
        out[f"many tasks, at most {scale.get('cap', '?')} running"] = scale.get("runs") or []
    inflight = _figures(report, "inflight")
    if inflight:
        out["all tasks in flight at once"] = [run for run in inflight.get("runs") or [] if not run.get("stopped")]
    return {label: sorted((r for r in runs if r.get("tasks_per_s")), key=lambda r: r["tasks"])
            for label, runs in out.items() if any(r.get("tasks_per_s") for r in runs)}


def load_chart(report: dict[str, Any]) -> Figure | None:
    """Throughput and peak memory (PSS of every process) against the number of tasks."""
    series = _load_series(report)
    if not series:
        return None
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(10, 4))
    for label, runs in series.items():
        tasks = [run["tasks"] for run in runs]
        left.plot(tasks, [run["tasks_per_s"] for run in runs], "o-", label=label)
        right.plot(tasks, [run["peak_pss_mib"] for run in runs], "o-", label=label)
    for ax, what in ((left, "tasks per second"), (right, "peak PSS (MiB)")):
        ax.set_xscale("log")
        ax.set_xlabel("tasks")
        ax.set_ylabel(what)
        ax.set_ylim(bottom=0)
    left.set_title("Throughput")
    right.set_title("Memory")
    left.legend(fontsize="small")
    fig.tight_layout()
    return fig


def baseline_chart(report: dict[str, Any]) -> Figure | None:
    """Tasks per second of Pegasus and of the baseline (one asyncio process), on I/O-bound and CPU-bound work."""
    base = _figures(report, "baseline")
    if not base:
        return None
    rows: list[tuple[str, dict[str, Any]]] = []
    if base.get("io"):
        rows.append((f"I/O: {base['io'].get('latency_ms', '?'):g} ms calls", base["io"]))
    rows += [(f"CPU: {row['burn_ms_target']:g} ms tool steps", row) for row in base.get("cpu") or []]
    rows = [(label, row) for label, row in rows if row.get("pegasus") and row.get("baseline")]
    if not rows:
        return None
    fig, ax = _pyplot().subplots(figsize=(8, 4.5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [row["pegasus"]["tasks_per_s"] for _, row in rows], 0.4, label="Pegasus")
    ax.bar([i + 0.2 for i in x], [row["baseline"]["tasks_per_s"] for _, row in rows], 0.4, label="baseline")
    ax.set_xticks(list(x), [label for label, _ in rows])
    ax.set_ylabel("tasks per second")
    ax.set_title("Pegasus against the baseline")
    ax.legend()
    return fig


CHARTS: dict[str, Callable[[dict[str, Any]], Figure | None]] = {
    "hop-latency.png": hop_chart, "pool-efficiency.png": pool_chart, "throughput-memory.png": load_chart,
    "baseline.png": baseline_chart,
}


def write(report: dict[str, Any], directory: Path) -> list[Path]:
    """Every chart the run has data for, as PNGs in ``directory`` (made if missing); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, chart in CHARTS.items():
        fig = chart(report)
        if fig is None:
            continue
        try:
            fig.savefig(directory / name, dpi=100)
        finally:
            _pyplot().close(fig)
        written.append(directory / name)
    return written


# -- the inflight scenario of several runs ------------------------------------------------------------


def load(argument: str) -> tuple[str, dict[str, Any]]:
    """A report and its label, from ``path`` or ``path=label`` (by default its git commit)."""
    path, label = argument, ""
    if not Path(argument).exists() and "=" in argument:
        path, label = argument.split("=", 1)
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    if INFLIGHT not in report.get("scenarios", {}):
        raise ValueError(f"{path}: no {INFLIGHT!r} scenario in this report")
    if not label:
        machine = report.get("machine", {})
        commit = machine.get("git_commit", "")[:8] or "unknown commit"
        label = f"commit {commit}{'+dirty' if machine.get('git_dirty') else ''}"
    return label, report


def series(reports: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """label -> its runs (N, peak PSS, throughput and bound when completed), by N; sizes run separately
    under one label join up.  Several runs of one N under one label: the median by throughput."""
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for label, report in reports:
        for run in report["scenarios"][INFLIGHT].get("figures", {}).get("runs", []):
            if "peak_pss_mib" not in run:
                continue  # a size that raised before it measured anything
            completed = not run.get("stopped") and "tasks_per_s" in run
            out.setdefault(label, {}).setdefault(int(run["tasks"]), []).append({
                "tasks": int(run["tasks"]), "pss_mib": float(run["peak_pss_mib"]), "completed": completed,
                "tasks_per_s": float(run["tasks_per_s"]) if completed else None,
                "bound_tasks_per_s": float(run["bound_tasks_per_s"]) if completed else None})
    return {label: [_median(runs[n]) for n in sorted(runs)] for label, runs in out.items()}


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The middle run by throughput (a stopped run counts as none), the lower of two middles."""
    ordered = sorted(runs, key=lambda run: run["tasks_per_s"] or 0.0)
    return ordered[(len(ordered) - 1) // 2]


def inflight_chart(lines: dict[str, list[dict[str, Any]]]) -> Figure:
    """Peak PSS (left; hollow: stopped before done, x: issue 18's targets) and throughput with its bound
    (right, dashed squares) against tasks in flight, one colour per label."""
    if not any(lines.values()):
        raise ValueError("no inflight run to plot")
    ns = sorted({run["tasks"] for runs in lines.values() for run in runs})
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(10, 4.6))
    for index, (label, runs) in enumerate(lines.items()):
        colour = f"C{index}"
        left.plot([r["tasks"] for r in runs], [r["pss_mib"] for r in runs], "-", color=colour, label=label)
        for run in runs:
            left.plot(run["tasks"], run["pss_mib"], "o", color=colour,
                      markerfacecolor=colour if run["completed"] else "white")
        done = [r for r in runs if r["completed"]]
        right.plot([r["tasks"] for r in done], [r["tasks_per_s"] for r in done], "o-", color=colour)
        right.plot([r["tasks"] for r in done], [r["bound_tasks_per_s"] for r in done], "s--", color=colour)
    for n, target in TARGETS.items():
        if "pss_mib" in target and n in ns:
            left.plot(n, target["pss_mib"], "x", color="black")
            left.annotate(f"≤ {target['pss_mib']:,.0f}", (n, target["pss_mib"]), textcoords="offset points",
                          xytext=(6, 4), fontsize="small")
    logarithmic = max(ns) / min(ns) >= 10
    for ax, title, unit in ((left, "Peak total PSS of the system", "MiB"),
                            (right, "Throughput (dashed: the bound)", "tasks / s")):
        if logarithmic:
            ax.set_xscale("log")
        ax.set_xticks(ns, [f"{n:,}" for n in ns])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("tasks in flight (N" + (", log scale)" if logarithmic else ")"))
        ax.set_ylabel(unit)
        ax.set_title(title)
    fig.legend(loc="lower center", ncol=max(len(lines), 1), fontsize="small", frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.charts",
                                     description="the inflight scenario of several runs, in one picture")
    parser.add_argument("reports", nargs="+", metavar="BENCH.json[=label]", help="benchmark reports (--json)")
    parser.add_argument("out", type=Path, metavar="OUT.svg", help="the picture (its format by its suffix)")
    args = parser.parse_args(argv)
    try:
        fig = inflight_chart(series([load(argument) for argument in args.reports]))
    except (OSError, ValueError, KeyError) as error:
        print(f"python -m benchmarks.charts: {error}", file=sys.stderr)
        return 2
    try:
        fig.savefig(args.out, dpi=100)
    finally:
        _pyplot().close(fig)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
