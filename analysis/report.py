"""`ccrig report DIR`: tables and plots for one run directory (the archive format of experiments/archive.py).

Writes, into DIR/report (or out_dir): report.md (images as files beside it), report.html (self-contained: the
same content with every PNG embedded as base64), and each plot as PNG and SVG:
- sweep_<param>.png: every swept parameter against goodput, throughput, EEE, UAR, loss and Jain (system), the
  mean of interval means with its 95 % confidence interval as error bars (as summary.json gives them);
- utility.png: Keshav's utility diagram: per flow, goodput against mean RTT, one colour per setup (sweep point),
  the flow's number written at the mean and a box spanning both 95 % confidence intervals;
- timeseries_p<NNN>.png: cwnd, smoothed RTT and queue occupancy against time for the chosen repetition;
- model.png: measured goodput of each flow against the GAIMD (α/β laws, Reno, AIMD-shaped polynomial laws) and
  Mathis predictions from its own measured loss and RTT;
- pause_gain.png: for runs with `pause_gain` on a pause_chain, the measured PAUSE goodput gain (with its 95 %
  CI) against the Markov model's gain (analysis/pause_markov.py) for the same λ1, μ1, μ2, ν, B1, B2, T1, T2.
Every number in the tables is read from summary.json, not recomputed.
"""
from __future__ import annotations

import base64
import csv
import html
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from ccrig.errors import InputError  # noqa: E402

from . import throughput as tp  # noqa: E402

SWEEP_METRICS = [("goodput_bps", "goodput (Mbit/s)", 1e-6), ("throughput_bps", "throughput (Mbit/s)", 1e-6),
                 ("eee", "EEE", 1.0), ("uar", "UAR", 1.0), ("loss", "loss", 1.0), ("jain", "Jain fairness", 1.0)]
TABLE_METRICS = [("goodput_bps", "goodput Mbit/s", 1e-6), ("throughput_bps", "throughput Mbit/s", 1e-6),
                 ("eee", "EEE", 1.0), ("uar", "UAR", 1.0), ("loss", "loss", 1.0), ("retrans_rate", "retrans", 1.0),
                 ("rtt_s", "RTT ms", 1e3), ("min_rtt_s", "min RTT ms", 1e3)]
MSS_BYTES = 1448  # payload of a 1500-byte Ethernet frame with TCP timestamps: the segment size of the predictions
MIN_RTO_S = 0.2  # Linux's minimum retransmission timeout; T0 for the GAIMD prediction is MIN_RTO_S + RTT


# --- reading the archive ------------------------------------------------------------------------------------

def load_summary(run_dir: Path) -> dict:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise InputError(f"RUN_DIR: got {str(run_dir)!r}; expected a run directory holding summary.json")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"RUN_DIR: got {str(path)!r}, which is not valid JSON ({e}); expected a summary.json "
                         f"written by ccrig run") from None


def read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# --- formatting ---------------------------------------------------------------------------------------------

def fmt_stat(stat: dict | None, scale: float = 1.0) -> str:
    """'mean ± half-width' of the 95 % CI (as in summary.json), or '–' when absent."""
    if not stat or stat.get("mean") is None:
        return "–"
    m = stat["mean"] * scale
    lo, hi = stat.get("ci95") or [None, None]
    if lo is None or hi is None or hi == lo:
        return f"{m:.4g}"
    return f"{m:.4g} ± {(hi - lo) / 2 * scale:.2g}"


def fmt_param(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# --- the plots ----------------------------------------------------------------------------------------------

def swept_params(points: list[dict]) -> list[str]:
    """Parameters whose value differs between points, in the order the spec gives them."""
    keys = []
    for p in points:
        for k in p.get("params", {}):
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({json.dumps(p.get("params", {}).get(k), sort_keys=True) for p in points}) > 1]


def _save(fig, out_dir: Path, name: str) -> Path:
    png = out_dir / f"{name}.png"
    fig.savefig(png, dpi=110, bbox_inches="tight")
    fig.savefig(out_dir / f"{name}.svg", bbox_inches="tight")
    plt.close(fig)
    return png


def plot_sweep(points: list[dict], param: str | None, out_dir: Path) -> Path:
    """System metrics against one swept parameter (or against the point index when nothing is swept)."""
    values = [p.get("params", {}).get(param) if param else p["index"] for p in points]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    xs = values if numeric else list(range(len(values)))
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, (key, label, scale) in zip(axes.ravel(), SWEEP_METRICS):
        means, lo, hi, px = [], [], [], []
        for x, p in zip(xs, points):
            s = p.get("system", {}).get(key)
            if not s or s.get("mean") is None:
                continue
            m = s["mean"] * scale
            ci = s.get("ci95") or [s["mean"], s["mean"]]
            px.append(x)
            means.append(m)
            lo.append(m - ci[0] * scale)
            hi.append(ci[1] * scale - m)
        ax.errorbar(px, means, yerr=[lo, hi], fmt="o-", capsize=4)
        ax.set_ylabel(label)
        ax.set_xlabel(param or "point")
        if not numeric:
            ax.set_xticks(xs, [fmt_param(v) for v in values], rotation=30, ha="right")
        ax.grid(alpha=0.3)
    fig.suptitle(f"system metrics against {param or 'point'} (mean of interval means, 95 % CI)")
    fig.tight_layout()
    name = "sweep_" + (param or "point").replace(".", "_").replace("/", "_")
    return _save(fig, out_dir, name)


def plot_utility(points: list[dict], out_dir: Path) -> Path:
    """Keshav's utility diagram: per flow goodput against RTT, a colour per setup, CI boxes."""
    fig, ax = plt.subplots(figsize=(8, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, p in enumerate(points):
        color = colors[n % len(colors)]
        label = f"point {p['index']}: " + ", ".join(f"{k}={fmt_param(v)}" for k, v in p.get("params", {}).items())
        first = True
        for f in p.get("flows", []):
            g, r = f.get("goodput_bps") or {}, f.get("rtt_s") or {}
            if g.get("mean") is None or r.get("mean") is None:
                continue
            x, y = g["mean"] * 1e-6, r["mean"] * 1e3
            ax.plot([x], [y], "o", color=color, ms=3, label=label if first else None)
            first = False
            ax.annotate(str(f["flow"]), (x, y), color=color, fontsize=11, ha="center", va="bottom")
            gl, gh = (g.get("ci95") or [None, None])
            rl, rh = (r.get("ci95") or [None, None])
            if None not in (gl, gh, rl, rh) and (gh > gl or rh > rl):
                ax.add_patch(Rectangle((gl * 1e-6, rl * 1e3), (gh - gl) * 1e-6, (rh - rl) * 1e3, fill=False,
                                       edgecolor=color, lw=1))
    ax.set_xlabel("goodput (Mbit/s)")
    ax.set_ylabel("mean smoothed RTT (ms)")
    ax.set_title("utility diagram: per flow, boxes = 95 % CI of goodput and RTT")
    ax.grid(alpha=0.3)
    if points:
        ax.legend(fontsize=7, loc="best")
    return _save(fig, out_dir, "utility")


def plot_timeseries(run_dir: Path, point: dict, repetition: int, out_dir: Path) -> Path | None:
    rep_dir = run_dir / "points" / f"{point['index']:03d}" / f"rep{repetition}"
    trace = read_csv(rep_dir / "trace.csv")
    qdisc = read_csv(rep_dir / "qdisc.csv")
    if not trace and not qdisc:
        return None
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    flows = sorted({r["flow"] for r in trace}, key=lambda s: (len(s), s))
    for flow in flows:
        rows = [r for r in trace if r["flow"] == flow]
        t = [_num(r["t"]) for r in rows]
        axes[0].plot(t, [_num(r["cwnd"]) for r in rows], lw=0.8, label=f"flow {flow}")
        axes[1].plot(t, [None if _num(r["srtt_s"]) is None else _num(r["srtt_s"]) * 1e3 for r in rows], lw=0.8,
                     label=f"flow {flow}")
    queues = sorted({(r.get("node", ""), r.get("dev", ""), r.get("handle", "")) for r in qdisc})
    for q in queues:
        rows = [r for r in qdisc if (r.get("node", ""), r.get("dev", ""), r.get("handle", "")) == q]
        if not any(_num(r.get("backlog_packets")) for r in rows):
            continue  # an idle qdisc says nothing and clutters the plot
        axes[2].step([_num(r["t"]) for r in rows], [_num(r.get("backlog_packets")) for r in rows], where="post",
                     lw=0.8, label=f"{q[0]}:{q[1]} {q[2]}")
    axes[0].set_ylabel("cwnd (segments)")
    axes[1].set_ylabel("srtt (ms)")
    axes[2].set_ylabel("queue (packets)")
    axes[2].set_xlabel("time since traffic start (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"point {point['index']}, repetition {repetition}")
    fig.tight_layout()
    return _save(fig, out_dir, f"timeseries_p{point['index']:03d}")


def law_of(cc: str):
    """(α, β kept) of a flow's congestion-control law when it is GAIMD-shaped, else None."""
    if cc == "reno":
        return 1.0, 0.5
    try:
        from ccrig.tcp_modules.laws import PRESETS, AlphaBeta, Poly
    except ImportError:
        return None
    law = PRESETS.get(cc)
    if isinstance(law, AlphaBeta):
        return law.alpha, law.beta
    if isinstance(law, Poly) and law.k == 0 and law.l == 1 and law.terms == 1:
        return law.alpha, 1.0 - law.beta  # W -= βW keeps (1 − β)W
    return None


def model_rows(points: list[dict]) -> list[dict]:
    """Per flow: measured goodput against GAIMD / Mathis from the flow's measured loss (else retransmission
    rate) and RTT. Flows without a loss measure get no prediction (the equations need p > 0)."""
    out = []
    for p in points:
        for f in p.get("flows", []):
            g = (f.get("goodput_bps") or {}).get("mean")
            rtt = (f.get("rtt_s") or {}).get("mean")
            loss = (f.get("loss") or {}).get("mean")
            if not loss:
                loss = (f.get("retrans_rate") or {}).get("mean")
            row = {"point": p["index"], "flow": f["flow"], "cc": f.get("cc"), "goodput_bps": g, "rtt_s": rtt,
                   "p": loss, "gaimd_bps": None, "mathis_bps": None, "law": None}
            if g is not None and rtt and loss and 0 < loss <= 1:
                row["mathis_bps"] = tp.mathis(loss, rtt, MSS_BYTES * 8)
                law = law_of(str(f.get("cc")))
                if law:
                    row["law"] = law
                    row["gaimd_bps"] = tp.gaimd(loss, rtt, MIN_RTO_S + rtt, 1.0, law[0], law[1]) * MSS_BYTES * 8
            out.append(row)
    return out


def plot_model(rows: list[dict], out_dir: Path) -> Path | None:
    rows = [r for r in rows if r["mathis_bps"] is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 6))
    for r in rows:
        x = r["goodput_bps"] * 1e-6
        ax.plot([x], [r["mathis_bps"] * 1e-6], "s", color="tab:orange", label="Mathis")
        if r["gaimd_bps"] is not None:
            ax.plot([x], [r["gaimd_bps"] * 1e-6], "o", color="tab:blue", label="GAIMD (Yang–Lam)")
        ax.annotate(f"{r['point']}/{r['flow']} {r['cc']}", (x, r["mathis_bps"] * 1e-6), fontsize=7)
    top = max([r["goodput_bps"] * 1e-6 for r in rows] + [r["mathis_bps"] * 1e-6 for r in rows]
              + [r["gaimd_bps"] * 1e-6 for r in rows if r["gaimd_bps"] is not None])
    ax.plot([0, top], [0, top], "k--", lw=0.8, label="prediction = measurement")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.set_xlabel("measured goodput (Mbit/s)")
    ax.set_ylabel("predicted throughput (Mbit/s)")
    ax.set_title("model overlay: predictions from each flow's measured loss and RTT")
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "model")


def markov_params(run_dir: Path, point: dict):
    """The Markov model's parameters for a measured PAUSE point, in the study's units (packets/s at scale 1),
    with a note of the mapping; None when the point has no PAUSE record.

    λ levels: (λ1, 1) as in every figure of the study (λ1 = link A's rate, λ_N = 1, N = 2). RTT: the point's
    measured mean RTT times the rig's time scale (the rig runs the study `scale` times faster)."""
    rec = point.get("pause")
    sc = (rec or {}).get("scaling") or {}
    if not rec or not sc.get("wire_bytes") or rec.get("high") is None:
        return None
    scale = float(sc.get("scale") or 1.0)
    pps = 8.0 * sc["wire_bytes"] * scale

    def rate(key):
        return sc[key] / pps if sc.get(key) else None

    b1 = None
    spec_path = run_dir / "spec.yaml"
    if spec_path.is_file():
        import yaml

        from ccrig.units import UnitError, parse_size
        try:
            buf = ((yaml.safe_load(spec_path.read_text()) or {}).get("topology", {}).get("link_b", {}) or {}).get("buffer")
            b1 = parse_size(buf).packets if buf is not None else None
        except (UnitError, AttributeError, yaml.YAMLError):
            b1 = None
    rtt = ((point.get("system") or {}).get("rtt_s") or {}).get("mean")
    kw = {"lam1": rate("link_a_bps"), "mu1": rate("link_b_bps"), "nu": rate("link_c_bps"),
          "mu2": rate("paused_bps"), "B1": b1, "B2": rec.get("b2"), "T1": rec.get("high"),
          "T2": rec.get("low", rec.get("high")), "rtt": None if rtt is None else rtt * scale}
    return kw


def pause_rows(run_dir: Path, points: list[dict]) -> list[dict]:
    from . import pause_markov as pm

    rows = []
    for p in points:
        kw = markov_params(run_dir, p)
        measured = p.get("pause_gain")
        if kw is None or not measured:
            continue
        row = {"point": p["index"], "params": p.get("params", {}), "measured": measured.get("percent"),
               "ci95": measured.get("ci95"), "model": None, "kw": kw, "note": ""}
        missing = [k for k, v in kw.items() if v is None]
        if missing:
            row["note"] = "model not computed: the archive lacks " + ", ".join(missing)
        else:
            try:
                params = pm.PauseParams(lam=(kw["lam1"], 1.0), mu1=kw["mu1"], mu2=kw["mu2"], nu=kw["nu"],
                                        B1=kw["B1"], B2=kw["B2"], T1=kw["T1"], T2=kw["T2"], rtt=kw["rtt"])
                row["model"] = pm.gain(params)[0]
            except InputError as e:
                row["note"] = f"model not computed: {e}"
        rows.append(row)
    return rows


def plot_pause(rows: list[dict], points: list[dict], out_dir: Path) -> Path | None:
    if not rows:
        return None
    swept = swept_params(points)
    param = swept[0] if swept else None
    xs = [r["params"].get(param) if param else r["point"] for r in rows]
    if not all(isinstance(x, (int, float)) for x in xs):
        xs = [r["point"] for r in rows]
        param = None
    fig, ax = plt.subplots(figsize=(8, 5))
    meas = [(x, r) for x, r in zip(xs, rows) if r["measured"] is not None]
    if meas:
        ax.errorbar([x for x, _ in meas], [r["measured"] for _, r in meas],
                    yerr=[[r["measured"] - (r["ci95"] or [r["measured"]] * 2)[0] for _, r in meas],
                          [(r["ci95"] or [r["measured"]] * 2)[1] - r["measured"] for _, r in meas]],
                    fmt="o", capsize=4, label="measured (95 % CI)")
    model = [(x, r["model"]) for x, r in zip(xs, rows) if r["model"] is not None]
    if model:
        ax.plot([x for x, _ in model], [g for _, g in model], "s--", label="Markov model")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel(param or "point")
    ax.set_ylabel("goodput gain of PAUSE (%)")
    ax.set_title("PAUSE gain: measurement against the Markov model")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, out_dir, "pause_gain")


# --- the documents ------------------------------------------------------------------------------------------

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
    doc.h(1, f"Run {summary.get('run', run_dir.name)}: {summary.get('experiment', '?')}")
    doc.p(f"Kernel {summary.get('kernel', '?')}, testbed {summary.get('testbed', '?')}. Measurement interval "
          f"{summary.get('interval_s', '?')} s, {summary.get('intervals', '?')} intervals of which the first "
          f"{summary.get('warmup', '?')} are discarded as warm-up, {reps if reps is not None else '?'} "
          f"repetition(s). Values are the mean of interval means ± half the 95 % confidence interval "
          f"(Student's t; over repetitions when there are several)."
          + ("" if summary.get("complete", True) else " The run did not complete: only finished points are here."))
    doc.h(2, "Points")
    params = []
    for p in points:
        for k in p.get("params", {}):
            if k not in params:
                params.append(k)
    header = ["point", *params, "T_max Mbit/s", "fair share Mbit/s", *[h for _, h, _ in TABLE_METRICS], "Jain"]
    rows = []
    for p in points:
        s = p.get("system", {})
        rows.append([str(p["index"]), *[fmt_param(p.get("params", {}).get(k, "")) for k in params],
                     f"{p['t_max_bps'] * 1e-6:.4g}" if p.get("t_max_bps") is not None else "–",
                     f"{p['fair_share_bps'] * 1e-6:.4g}" if p.get("fair_share_bps") is not None else "–",
                     *[fmt_stat(s.get(k), sc) for k, _, sc in TABLE_METRICS], fmt_stat(s.get("jain"))])
    doc.table(header, rows)
    doc.h(2, "Flows")
    frows = []
    for p in points:
        for f in p.get("flows", []):
            frows.append([str(p["index"]), str(f["flow"]), str(f.get("cc", "")),
                          f"{f.get('sender', '')} → {f.get('receiver', '')}",
                          *[fmt_stat(f.get(k), sc) for k, _, sc in TABLE_METRICS]])
    doc.table(["point", "flow", "cc", "path", *[h for _, h, _ in TABLE_METRICS]], frows)

    doc.h(2, "Metrics against the swept parameters")
    for param in swept_params(points) or [None]:
        doc.img(plot_sweep(points, param, out_dir), f"system metrics against {param or 'point'}")
    doc.h(2, "Utility diagram")
    doc.img(plot_utility(points, out_dir), "per-flow goodput against RTT with 95 % confidence boxes")
    doc.h(2, f"Time series (repetition {repetition})")
    for p in points:
        path = plot_timeseries(run_dir, p, repetition, out_dir)
        if path is None:
            doc.p(f"point {p['index']}: no trace.csv or qdisc.csv for repetition {repetition}")
        else:
            doc.img(path, f"cwnd, RTT and queue occupancy, point {p['index']}, repetition {repetition}")
    doc.h(2, "Models")
    mrows = model_rows(points)
    doc.p(f"Predictions from each flow's measured loss (retransmission rate when no loss was measured) and mean "
          f"RTT; segment {MSS_BYTES} B; GAIMD with T0 = {MIN_RTO_S} s + RTT and b = 1; Mathis with c = √(3/2). "
          f"GAIMD only for laws of GAIMD shape (α/β laws, Reno, AIMD polynomial).")
    doc.table(["point", "flow", "cc", "p", "RTT ms", "goodput Mbit/s", "GAIMD Mbit/s", "Mathis Mbit/s"],
              [[str(r["point"]), str(r["flow"]), str(r["cc"]), "–" if r["p"] is None else f"{r['p']:.3g}",
                "–" if r["rtt_s"] is None else f"{r['rtt_s'] * 1e3:.4g}",
                "–" if r["goodput_bps"] is None else f"{r['goodput_bps'] * 1e-6:.4g}",
                "–" if r["gaimd_bps"] is None else f"{r['gaimd_bps'] * 1e-6:.4g}",
                "–" if r["mathis_bps"] is None else f"{r['mathis_bps'] * 1e-6:.4g}"] for r in mrows])
    path = plot_model(mrows, out_dir)
    if path is not None:
        doc.img(path, "measured goodput against the GAIMD and Mathis predictions")
    prows = pause_rows(run_dir, points)
    if prows:
        doc.h(2, "PAUSE gain against the Markov model")
        doc.p("Markov model (study 000 §III) with the measured point's rates in the study's units (the rig's rates "
              "divided by its scale and by the wire packet size), λ = (λ1, 1), B1 from the spec's link_b buffer, "
              "B2, T1, T2 from the PAUSE record, RTT = measured mean RTT × scale; the gain compares T1, T2 with "
              "T1 = B2, as the measurement compares PAUSE on with PAUSE off.")
        doc.table(["point", "λ1", "μ1", "μ2", "ν", "B1", "B2", "T1", "T2", "RTT s", "measured %", "95 % CI",
                   "model %", "note"],
                  [[str(r["point"]), *[("–" if r["kw"][k] is None else f"{r['kw'][k]:.4g}")
                                       for k in ("lam1", "mu1", "mu2", "nu", "B1", "B2", "T1", "T2", "rtt")],
                    "–" if r["measured"] is None else f"{r['measured']:+.2f}",
                    "–" if not r["ci95"] else f"[{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}]",
                    "–" if r["model"] is None else f"{r['model']:+.2f}", r["note"]] for r in prows])
        path = plot_pause(prows, points, out_dir)
        if path is not None:
            doc.img(path, "PAUSE goodput gain: measured against the Markov model")
    return doc


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
