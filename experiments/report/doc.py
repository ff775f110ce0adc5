"""The report as a document: its sections and tables from summary.json, the figures placed among them, written
as report.md (images beside it) and report.html (self-contained)."""
from __future__ import annotations

import base64
import html
from pathlib import Path

from ccrig.analysis import metric_table
from ccrig.errors import InputError

from ccrig.experiments.report import models

from ccrig.experiments.report import plots
from ccrig.experiments.report.summary import ci_rows, fmt_param, fmt_stat, load_summary, swept_params

# the columns of the points' and the flows' tables: every metric summary.json holds for the system and per flow
SYSTEM_COLUMNS = [(m.name, m.heading, m.scale) for m in metric_table.of("system", ci=True)]
FLOW_COLUMNS = [(m.name, m.heading, m.scale) for m in metric_table.of("flow", ci=True)]


class Doc:
    """A list of blocks rendered both as Markdown and as self-contained HTML."""

    def __init__(self):
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list[str]]):
        self.blocks.append(("table", header, rows))

    def img(self, path: Path, caption: str):
        self.blocks.append(("img", path, caption))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "table":
                out.append("| " + " | ".join(b[1]) + " |")
                out.append("|" + "---|" * len(b[1]))
                out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in b[2]]
            else:
                out.append(f"![{b[2]}]({b[1].name})  \n*{b[2]}* ([SVG]({b[1].with_suffix('.svg').name}))")
            out.append("")
        return "\n".join(out)

    def html(self, title: str) -> str:
        out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
               "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
               "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;"
               "text-align:right}th{background:#eee}img{max-width:100%}</style></head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"<h{b[1]}>{html.escape(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                out.append(f"<p>{html.escape(b[1])}</p>")
            elif b[0] == "table":
                out.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in b[1]) + "</tr>")
                out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b[2]]
                out.append("</table>")
            else:
                data = base64.b64encode(b[1].read_bytes()).decode()
                out.append(f"<figure><img alt='{html.escape(b[2])}' src='data:image/png;base64,{data}'>"
                           f"<figcaption>{html.escape(b[2])}</figcaption></figure>")
        out.append("</body></html>")
        return "\n".join(out)


def build(run_dir: Path, out_dir: Path, repetition: int = 0) -> Doc:
    summary = load_summary(run_dir)
    points = summary.get("points", [])
    reps = summary.get("repetitions")
    if not isinstance(repetition, int) or repetition < 0 or (isinstance(reps, int) and repetition >= reps):
        raise InputError(f"--repetition: got {repetition!r}; expected an integer in 0..{(reps or 1) - 1}")
    doc = Doc()
    _intro(doc, run_dir, summary, reps)
    _tables(doc, points)
    _figures(doc, run_dir, out_dir, points, repetition)
    _models(doc, run_dir, out_dir, points)
    return doc


def _intro(doc: Doc, run_dir: Path, summary: dict, reps) -> None:
    doc.h(1, f"Run {summary.get('run', run_dir.name)}: {summary.get('experiment', '?')}")
    doc.p(f"Kernel {summary.get('kernel', '?')}, testbed {summary.get('testbed', '?')}. Measurement interval "
          f"{summary.get('interval_s', '?')} s, {summary.get('intervals', '?')} intervals of which the first "
          f"{summary.get('warmup', '?')} are discarded as warm-up, {reps if reps is not None else '?'} "
          f"repetition(s). Values are the mean of interval means ± half the "
          f"{summary.get('ci_level', 0.95) * 100:.4g} % confidence interval, marked with the method that made "
          f"it: r = Student's t over the repetitions' means (when there are two or more), b = batch means within "
          f"the run (consecutive intervals merged until the batches are nearly uncorrelated: interval means of "
          f"one flow are strongly autocorrelated, so t over them as if independent would be too narrow); "
          f"(no CI) = too few independent samples to say. The table 'Confidence intervals' gives each system "
          f"metric's method, sample count n, effective sample size n_eff and batch length."
          + ("" if summary.get("seed") is None else
             f" Points and repetitions ran in a randomised order, seed {summary['seed']}.")
          + ("" if summary.get("complete", True) else " The run did not complete: only finished points are here."))


def _tables(doc: Doc, points: list[dict]) -> None:
    """The points, their intervals' methods, measurement problems, fidelity, the flows."""
    doc.h(2, "Points")
    params = []
    for p in points:
        for k in p.get("params", {}):
            if k not in params:
                params.append(k)
    header = ["point", *params, "T_max Mbit/s", "fair share Mbit/s", *[h for _, h, _ in SYSTEM_COLUMNS]]
    rows = []
    for p in points:
        s = p.get("system", {})
        rows.append([str(p["index"]), *[fmt_param(p.get("params", {}).get(k, "")) for k in params],
                     f"{p['t_max_bps'] * 1e-6:.4g}" if p.get("t_max_bps") is not None else "–",
                     f"{p['fair_share_bps'] * 1e-6:.4g}" if p.get("fair_share_bps") is not None else "–",
                     *[fmt_stat(s.get(k), sc) for k, _, sc in SYSTEM_COLUMNS]])
    doc.table(header, rows)
    # how each interval was made; measurement problems (goodput above T_max) and unreliable points
    cis = ci_rows(points, SYSTEM_COLUMNS)
    if cis:
        doc.h(2, "Confidence intervals")
        doc.table(["point", "metric", "method", "n", "n_eff", "batch length", "why none"], cis)
    problems = [f"point {p['index']}: {x}" for p in points
                for x in [*p.get("measurement_problems", []), *p.get("unreliable", [])]]
    if problems:
        doc.h(2, "Measurement problems")
        for x in problems:
            doc.p(x)
    # whether the testbed, not the configured bottleneck, limited each point (experiments/run/fidelity.py)
    if any("fidelity" in p for p in points):
        doc.h(2, "Fidelity")
        doc.table(["point", "verdict", "why"],
                  [[str(p["index"]), p["fidelity"]["verdict"], "; ".join(p["fidelity"]["reasons"]) or "–"]
                   for p in points if "fidelity" in p])
    # what a verdict leaves out of each repetition (analysis/samples.py: a kernel fault's intervals, a spoiled one)
    left_out = [[str(p["index"]), str(r.get("rep", "")), e["what"],
                 " ".join(str(i) for i in e.get("intervals", [])) or "all", e["reason"]]
                for p in points for r in p.get("repetitions", []) for e in r.get("exclusions") or []]
    if left_out:
        doc.h(2, "Left out of verdicts")
        doc.table(["point", "repetition", "what", "intervals", "why"], left_out)
    doc.h(2, "Flows")
    frows = []
    for p in points:
        for f in p.get("flows", []):
            frows.append([str(p["index"]), str(f["flow"]), str(f.get("cc", "")),
                          f"{f.get('sender', '')} → {f.get('receiver', '')}",
                          *[fmt_stat(f.get(k), sc) for k, _, sc in FLOW_COLUMNS]])
    doc.table(["point", "flow", "cc", "path", *[h for _, h, _ in FLOW_COLUMNS]], frows)



def _figures(doc: Doc, run_dir: Path, out_dir: Path, points: list[dict], repetition: int) -> None:
    doc.h(2, "Metrics against the swept parameters")
    for param in swept_params(points) or [None]:
        doc.img(plots.plot_sweep(points, param, out_dir), f"system metrics against {param or 'point'}")
    doc.h(2, "Utility diagram")
    boxes = plots.utility_boxes(points)
    doc.img(plots.plot_utility(points, out_dir), "per-flow goodput against RTT" + (
        " with 95 % confidence boxes" if boxes else ", no confidence boxes (too few repetitions for intervals)"))
    doc.h(2, f"Time series (repetition {repetition})")
    for p in points:
        path = plots.plot_timeseries(run_dir, p, repetition, out_dir)
        if path is None:
            doc.p(f"point {p['index']}: no trace.csv or qdisc.csv for repetition {repetition}")
        else:
            doc.img(path, f"cwnd, RTT and queue occupancy, point {p['index']}, repetition {repetition}")
    cdf = plots.plot_sojourn_cdf(run_dir, points, repetition, out_dir)
    if cdf is not None:
        doc.h(2, "Queue sojourn")
        doc.img(cdf, "sojourn of every packet in each watched qdisc (the queue monitor), one line per point")
    sequences = [path for p in points for path in plots.plot_time_sequence(run_dir, p, repetition, out_dir)]
    if sequences:
        doc.h(2, "Time-sequence graphs (from the capture)")
        for path in sequences:
            doc.img(path, f"{path.stem}: data, retransmissions, ACKs and SACK blocks ({path.stem}.csv: its points)")


def _models(doc: Doc, run_dir: Path, out_dir: Path, points: list[dict]) -> None:
    """Each flow against the throughput equations; PAUSE's gain against the Markov model."""
    doc.h(2, "Models")
    mrows = models.model_rows(points)
    doc.p(f"Predictions from each flow's measured loss (retransmission rate when no loss was measured) and mean "
          f"RTT; segment {models.MSS_BYTES} B; GAIMD with T0 = {models.MIN_RTO_S} s + RTT and b = 1; Mathis with "
          f"c = √(3/2). GAIMD only for laws of GAIMD shape (α/β laws, Reno, AIMD polynomial).")
    doc.table(["point", "flow", "cc", "p", "RTT ms", "goodput Mbit/s", "GAIMD Mbit/s", "Mathis Mbit/s"],
              [[str(r["point"]), str(r["flow"]), str(r["cc"]), "–" if r["p"] is None else f"{r['p']:.3g}",
                "–" if r["rtt_s"] is None else f"{r['rtt_s'] * 1e3:.4g}",
                "–" if r["goodput_bps"] is None else f"{r['goodput_bps'] * 1e-6:.4g}",
                "–" if r["gaimd_bps"] is None else f"{r['gaimd_bps'] * 1e-6:.4g}",
                "–" if r["mathis_bps"] is None else f"{r['mathis_bps'] * 1e-6:.4g}"] for r in mrows])
    path = plots.plot_model(mrows, out_dir)
    if path is not None:
        doc.img(path, "measured goodput against the GAIMD and Mathis predictions")
    prows = models.pause_rows(run_dir, points)
    if prows:
        doc.h(2, "PAUSE gain against the Markov model")
        doc.p("Markov model (study 000 §III) with the measured point's rates in the study's units (the rig's rates "
              "divided by its scale and by the wire packet size), λ = (λ1, 1) beside flows with idle times and "
              "(λ1, λ1/2, 1) beside always-backlogged ones (N as the paper sets it), B1 from the spec's link_b "
              "buffer, B2, T1, T2 from the PAUSE record, RTT = the configured RTT (topology.rtt, the study's "
              "time); the gain compares T1, T2 with T1 = B2, as the measurement compares PAUSE on with PAUSE off.")
        doc.table(["point", "λ1", "N", "μ1", "μ2", "ν", "B1", "B2", "T1", "T2", "RTT s", "measured %", "95 % CI",
                   "model %", "note"],
                  [[str(r["point"]), "–" if r["kw"]["lam1"] is None else f"{r['kw']['lam1']:.4g}",
                    "–" if r["kw"]["lam"] is None else str(len(r["kw"]["lam"])),
                    *[("–" if r["kw"][k] is None else f"{r['kw'][k]:.4g}")
                      for k in ("mu1", "mu2", "nu", "B1", "B2", "T1", "T2", "rtt")],
                    "–" if r["measured"] is None else f"{r['measured']:+.2f}",
                    "–" if not r["ci95"] else f"[{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}]",
                    "–" if r["model"] is None else f"{r['model']:+.2f}", r["note"]] for r in prows])
        doc.p("The model's performance measures (§III-B) beside the measured ones, with PAUSE / without: P1 and P2 "
              "are node 1's and node 2's drops per arriving packet (measured: their qdisc counters over the "
              "repetitions), utilisation the throughput over ν (measured: goodput over T_max).")
        doc.table(["point", "P1 model", "P1 measured", "P2 model", "P2 measured", "utilisation model",
                   "utilisation measured"],
                  [[str(r["point"]), *[" / ".join(_share(r["measures"][side].get(k)) for side in ("with", "without"))
                                       for k in ("model_P1", "P1", "model_P2", "P2", "model_util", "util")]]
                   for r in prows])
        path = plots.plot_pause(prows, points, out_dir)
        if path is not None:
            doc.img(path, "PAUSE goodput gain: measured against the Markov model")


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def report(run_dir: Path, out_dir: Path | None = None, repetition: int = 0) -> Path:
    """Write report.md, report.html and the plots for `run_dir`; returns the path of report.html."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "report"
    summary = load_summary(run_dir)  # fail on a bad directory before creating anything
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = build(run_dir, out_dir, repetition)
    (out_dir / "report.md").write_text(doc.markdown())
    target = out_dir / "report.html"
    target.write_text(doc.html(f"ccrig report: {summary.get('run', run_dir.name)}"))
    return target
