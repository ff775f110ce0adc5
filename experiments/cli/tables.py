"""The summary as the terminal shows it: one table per point (each flow and the system, mean ± CI half-width with
the CI's method), then the point's notes (measurement problems, reliability, the testbed's fidelity verdict, the
PAUSE gain). `ccrig run` prints it; under --json the summary.json document is printed instead."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from ccrig import jsondoc
from ccrig.analysis import metric_table
from ccrig.analysis.metric_table import Metric

# wide enough for the summary table when the output is not a terminal (a log, CI)
console = Console(width=None if sys.stdout.isatty() else 150)

# every CI printed says how it was made (summary.json's `ci`: method, n, n_eff, batch length)
CI_MARKS = {"runs": "r", "batches": "b"}


def _fmt(stat: dict, metric: Metric | None = None, marked: bool = True) -> str:
    """mean ±half-width in the metric's display unit, the half-width marked with its method (r: across
    repetitions, b: batch means within a run) unless marked is False (one method for the whole table: ci_note
    says it); a metric without an interval (method none) gets "(no CI)"."""
    m = stat["mean"]
    if m is None:
        return "-"
    ci = stat.get("ci") or {}
    lo, hi = stat.get("ci95") or (None, None)
    scale, digits = (metric.scale, metric.digits) if metric is not None else (1.0, 3)
    if lo is None:
        return f"{m * scale:.{digits}f} (no CI)" if ci else f"{m * scale:.{digits}f}"
    mark = CI_MARKS.get(ci.get("method"), "?") if ci and marked else ""
    return f"{m * scale:.{digits}f} ±{(hi - lo) / 2 * scale:.{digits}f}" + (f" {mark}" if mark else "")


def methods(stats_: list[dict]) -> set[str]:
    """The methods of the intervals among these metrics (none left out)."""
    return {(s.get("ci") or {}).get("method") for s in stats_ if s and s.get("ci95")} - {None}


def ci_note(summary: dict, only: str | None = None) -> str:
    """The footnote that says how the CIs were made: one method for all (only), or what the marks mean."""
    level = summary.get("ci_level", 0.95)
    reps = summary.get("repetitions", 1)
    what = {"runs": f"Student's t over the {reps} repetitions' means",
            "batches": "batch means within the run (batches long enough to be nearly uncorrelated; n_eff and "
                       "batch length in summary.json)"}
    if only is not None:
        body = f"every interval here is {only}: {what.get(only, only)}"
    else:
        body = f"r = {what['runs']}, b = {what['batches']}"
    return (f"CI: {level * 100:.4g} % confidence; {body}; (no CI) = too few independent samples to say (the "
            f"reason is in summary.json)")


def show_summary(summary: dict, json_out=None) -> None:
    """The summary as tables, or (json_out: the real stdout under --json) as the summary.json document."""
    if json_out is not None:
        jsondoc.emit(summary, json_out)
    else:
        print_summary(summary)


def print_summary(summary: dict) -> None:
    console.print(f"[bold]{summary['experiment']}[/] — {summary['run']} — kernel {summary['kernel']}, "
                  f"{summary['intervals']} intervals of {summary['interval_s']:g} s (first {summary['warmup']} "
                  f"discarded), {summary['repetitions']} repetition(s); mean ± "
                  f"{summary.get('ci_level', 0.95) * 100:.4g} % CI half-width (how each CI was made: below each table)")
    cols = [m for m in metric_table.TABLE if m.terminal]
    for p in summary["points"]:
        params = ", ".join(f"{k}={v}" for k, v in p["params"].items()) or "single point"
        if "failed" in p:   # no repetition of it finished
            console.print(f"point {p['index']}: {params} — failed: {p['failed']}")
            continue
        t = Table(title=f"point {p['index']}: {params} — T_max {p['t_max_bps'] / 1e6:.3f} Mbit/s "
                        f"(fair share {p['fair_share_bps'] / 1e6:.3f})")
        t.add_column("flow")
        t.add_column("cc")
        for m in cols:
            t.add_column(m.short_heading, justify="right")
        s = p["system"]
        # each CI says its method: once for the table when all share one, else a mark per cell
        found = methods([e.get(m.name) for e in [*p["flows"], s] for m in cols])
        marked = len(found) > 1
        # a system-only metric's cell is empty in the flows' rows, and so is one a point archived before it lacks
        for f in p["flows"]:
            flow = f"{f['flow']} {f['label']}" if f.get("label") else str(f["flow"])
            t.add_row(flow, f["cc"], *[_fmt(f[m.name], m, marked) if m.name in f else "" for m in cols])
        t.add_row("system", "", *[_fmt(s[m.name], m, marked) if m.name in s else "" for m in cols], style="bold")
        console.print(t)
        console.print(ci_note(summary, None if marked else next(iter(found), "none")), markup=False)
        for problem in p.get("measurement_problems", []):   # goodput above T_max beyond its CI
            console.print(f"measurement problem: {problem}", markup=False)
        for why in p.get("unreliable", []):   # a late sampler degraded too many intervals
            console.print(f"unreliable: {why}", markup=False)
        fid = p.get("fidelity")   # whether the testbed, not the configured link, limited the point
        if fid is not None:
            console.print(f"fidelity: {fid['verdict']}" + (f" — {'; '.join(fid['reasons'])}" if fid["reasons"]
                                                          else ""), markup=False)
        gain = p.get("pause_gain")
        if gain and gain.get("percent") is not None:
            lo, hi = gain.get("ci95") or (None, None)
            none = lo is None or gain.get("ci_method") == "none"   # say how, or why not
            ci = (f" (no CI: {gain.get('reason') or 'too few samples'})" if none else
                  f" ({gain.get('level', 0.95) * 100:.4g} % CI {lo:.1f} .. {hi:.1f}, "
                  f"{gain.get('ci_method') or 'delta method'})")
            console.print(f"PAUSE gain: goodput {gain['percent']:+.1f} %{ci} against the same point without PAUSE")
