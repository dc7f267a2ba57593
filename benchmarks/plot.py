"""``python -m benchmarks.plot BENCH.json [MORE.json ...] OUT.svg``: the inflight scenario as a picture.

Two panels against tasks in flight (N): the system's peak total PSS, and its
throughput beside the bound's.  Each JSON is a ``python -m benchmarks --json``
report with an ``inflight`` scenario; runs are grouped into one line per label
(``path=label`` names it; by default the report's git commit), so sizes run
separately join up.  A run stopped before it completed (timeout, memory guard)
shows its PSS at the stop as a hollow point and no throughput.  The SVG is
written by hand: no plotting library is needed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from benchmarks.inflight import NAME, TARGETS

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
WIDTH, HEIGHT, PANEL_W, PANEL_H = 960, 440, 380, 290
LEFT, TOP = 80, 60


def load(argument: str) -> tuple[str, dict[str, Any]]:
    """A report and its label, from ``path`` or ``path=label``."""
    path, label = argument, ""
    if not Path(argument).exists() and "=" in argument:
        path, label = argument.split("=", 1)
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    if NAME not in report.get("scenarios", {}):
        raise ValueError(f"{path}: no {NAME!r} scenario in this report")
    if not label:
        commit = report.get("machine", {}).get("git_commit", "")[:8] or "unknown commit"
        label = f"commit {commit}{'+dirty' if report.get('machine', {}).get('git_dirty') else ''}"
    return label, report


def series(reports: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """label -> its runs (N, peak PSS, throughput and bound when completed, whether stopped), by N.

    Several runs of one N under one label (repeated on a noisy host): the median by throughput is drawn.
    """
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for label, report in reports:
        for run in report["scenarios"][NAME].get("figures", {}).get("runs", []):
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


def nice_ceiling(value: float) -> tuple[float, float]:
    """An axis top at or above ``value`` and its tick step (1, 2 or 5 x 10^k, about five ticks)."""
    if value <= 0:
        return 1.0, 0.2
    raw = value / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return step * math.ceil(value / step - 1e-9), step


def _x_scale(ns: list[int]) -> tuple[Callable[[float], float], bool]:
    lo, hi = min(ns), max(ns)
    logarithmic = hi / lo >= 10
    if logarithmic:
        a, b = math.log10(lo) - 0.15, math.log10(hi) + 0.15
        return (lambda n: (math.log10(n) - a) / (b - a)), True
    if hi == lo:
        return (lambda n: 0.5), False
    pad = (hi - lo) * 0.08
    return (lambda n: (n - lo + pad) / (hi - lo + 2 * pad)), False


def _panel(x0: float, title: str, unit: str, ns: list[int],
           lines: list[tuple[str, str, list[tuple[int, float, str]]]], marks: list[tuple[int, float, str]]) -> list[str]:
    """One panel: axes, ticks, then each (colour, dash, points) line; points are (N, value, marker): a
    ``solid`` or ``hollow`` circle, or a small ``square``."""
    values = [v for _, _, points in lines for _, v, _ in points] + [v for _, v, _ in marks]
    top, step = nice_ceiling(max(values, default=1.0) * 1.05)
    fx, logarithmic = _x_scale(ns)
    px = lambda n: x0 + fx(n) * PANEL_W
    py = lambda v: TOP + PANEL_H - v / top * PANEL_H
    out = [f'<text x="{x0 + PANEL_W / 2}" y="{TOP - 18}" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#444"/>']
    for i in range(round(top / step) + 1):
        v = i * step
        out.append(f'<line x1="{x0}" y1="{py(v):.1f}" x2="{x0 + PANEL_W}" y2="{py(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:,.{0 if step >= 1 else 1}f}</text>')
    for n in ns:
        out.append(f'<line x1="{px(n):.1f}" y1="{TOP + PANEL_H}" x2="{px(n):.1f}" y2="{TOP + PANEL_H + 5}" '
                   'stroke="#444"/>')
        out.append(f'<text x="{px(n):.1f}" y="{TOP + PANEL_H + 18}" text-anchor="middle">{n:,}</text>')
    axis = "tasks in flight (N" + (", log scale)" if logarithmic else ")")
    out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP + PANEL_H + 38}" text-anchor="middle">{axis}</text>')
    out.append(f'<text transform="translate({x0 - 55},{TOP + PANEL_H / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(unit)}</text>')
    for colour, dash, points in lines:
        if len(points) > 1:
            path = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v, _ in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"'
                       + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        for n, v, marker in points:
            tip = f"<title>N={n:,}: {v:,.1f} {escape(unit)}</title>"
            if marker == "square":
                out.append(f'<rect x="{px(n) - 3:.1f}" y="{py(v) - 3:.1f}" width="6" height="6" fill="{colour}">'
                           f"{tip}</rect>")
                continue
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="4" stroke="{colour}" stroke-width="2" '
                       f'fill="{colour if marker == "solid" else "white"}">{tip}</circle>')
    for n, v, label in marks:
        x, y = px(n), py(v)
        out.append(f'<path d="M{x - 5:.1f},{y - 5:.1f} L{x + 5:.1f},{y + 5:.1f} M{x - 5:.1f},{y + 5:.1f} '
                   f'L{x + 5:.1f},{y - 5:.1f}" stroke="#000" stroke-width="1.5"/>')
        right = x > x0 + PANEL_W * 0.6  # near the right edge: the label goes to the mark's left
        out.append(f'<text x="{x - 8 if right else x + 8:.1f}" y="{y - 6:.1f}" font-size="11" '
                   f'text-anchor="{"end" if right else "start"}">{escape(label)}</text>')
    return out


def svg(lines_by_label: dict[str, list[dict[str, Any]]]) -> str:
    """The picture: peak PSS (left) and throughput with its bound (right) against N, one colour per label."""
    if not any(lines_by_label.values()):
        raise ValueError("no inflight run to plot")
    ns = sorted({run["tasks"] for runs in lines_by_label.values() for run in runs})
    pss, throughput, legend = [], [], []
    for index, (label, runs) in enumerate(lines_by_label.items()):
        colour = COLOURS[index % len(COLOURS)]
        pss.append((colour, "", [(r["tasks"], r["pss_mib"], "solid" if r["completed"] else "hollow") for r in runs]))
        done = [r for r in runs if r["completed"]]
        throughput.append((colour, "", [(r["tasks"], r["tasks_per_s"], "solid") for r in done]))
        throughput.append((colour, "6,4", [(r["tasks"], r["bound_tasks_per_s"], "square") for r in done]))
        legend.append((colour, label))
    targets = [(n, t["pss_mib"], f"≤ {t['pss_mib']:,.0f}") for n, t in TARGETS.items()
               if "pss_mib" in t and n in ns]
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">'),
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    out += _panel(LEFT, "Peak total PSS of the system", "MiB", ns, pss, targets)
    out += _panel(LEFT + PANEL_W + 100, "Throughput (dashed: the bound)", "tasks / s", ns, throughput, [])
    y = HEIGHT - 30
    x = float(LEFT)
    for colour, label in legend:
        out.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{x + 30}" y="{y}">{escape(label)}</text>')
        x += 42 + 7 * len(label)
    out.append(f'<text x="{LEFT}" y="{y + 20}" fill="#555">hollow: stopped before done (PSS at the stop); '
               "squares: the bound; ×: issue 18's PSS targets</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", metavar="BENCH.json[=label]", help="benchmark reports (--json)")
    parser.add_argument("out", type=Path, metavar="OUT.svg")
    args = parser.parse_args(argv)
    try:
        picture = svg(series([load(argument) for argument in args.reports]))
    except (OSError, ValueError, KeyError) as error:
        print(f"python -m benchmarks.plot: {error}", file=sys.stderr)
        return 2
    args.out.write_text(picture, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
