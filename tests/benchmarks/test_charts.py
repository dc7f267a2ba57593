"""``python -m benchmarks --plots DIR`` (``benchmarks/charts.py``): PNG charts of a run, from its JSON alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks import charts
from benchmarks.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    import matplotlib.image  # here: matplotlib is no cost of collecting the suite

    assert path.read_bytes()[:8] == PNG, path
    height, width = matplotlib.image.imread(path).shape[:2]
    assert width >= 600 and height >= 300, (path, width, height)


def test_the_docs_run_gives_every_chart(tmp_path: Path, capsys) -> None:
    """``--from`` charts a run already written (docs/benchmark-run.json: the PNGs docs/performance.md shows)."""
    assert main(["--plots", str(tmp_path / "charts"), "--from", str(ROOT / "docs" / "benchmark-run.json")]) == 0
    written = sorted(p.name for p in (tmp_path / "charts").iterdir())
    assert written == sorted(charts.CHARTS)
    for name in written:
        assert_png(tmp_path / "charts" / name)
    assert "charts written" in capsys.readouterr().out


def test_hops_kept_by_the_run_are_drawn_as_a_histogram_and_missing_scenarios_give_no_chart(tmp_path: Path) -> None:
    hop = {m: {"hop": {"p50_ms": 1.0, "mean_ms": 1.1, "p99_ms": 2.0, "max_ms": 3.0}, "hops_ms": [1.0, 1.2, 2.5, 1.1]}
           for m in charts.MACHINES}
    report = {"mode": "quick", "scenarios": {"hop": {"figures": hop}, "pool": {"error": "Traceback ..."}}}
    fig = charts.hop_chart(report)
    assert fig is not None and fig.axes[0].get_xlabel().startswith("hop (ms)")  # a histogram, not percentiles
    assert charts.write(report, tmp_path) == [tmp_path / "hop-latency.png"]
    assert_png(tmp_path / "hop-latency.png")


def test_a_run_with_nothing_to_chart_never_loads_matplotlib(tmp_path: Path) -> None:
    """Most quick runs of the suite (``--only`` a scenario no chart draws) wrote no chart but paid
    matplotlib's import; a fresh process shows what ``--plots`` loads."""
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"mode": "quick", "scenarios": {"cli": {"figures": {"commands": []}}}}))
    check = ("import sys; from benchmarks.__main__ import main; "
             f"assert main(['--plots', {str(tmp_path / 'charts')!r}, '--from', {str(run)!r}]) == 0; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "charts written: none" in done.stdout and done.stdout.splitlines()[-1] == "[]", done.stdout
    assert list((tmp_path / "charts").iterdir()) == []


def test_from_without_plots_is_a_usage_error(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"scenarios": {}}))
    try:
        main(["--from", str(run)])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--from needs --plots DIR" in capsys.readouterr().err
