"""The report's figures, each saved as PNG and SVG beside report.md (names in experiments/report/__init__.py)."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: the figures only go to files
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in the SVGs: searchable, and checkable by tests
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from ccrig.qdiscs import sojourn  # noqa: E402
from ccrig.analysis import metric_table, pcap  # noqa: E402
from ccrig.experiments.report.summary import flow_label, fmt_param, swept_params  # noqa: E402

# the panels of the figure against the swept parameter: the system's metrics the table marks for it
SWEEP_METRICS = [(m.name, m.axis, m.scale) for m in metric_table.TABLE if m.sweep and m.has("system")]


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
    rows = math.ceil(len(SWEEP_METRICS) / 3)   # three panels a row, as many rows as the table's metrics need
    fig, axes = plt.subplots(rows, 3, figsize=(12, 3.25 * rows), squeeze=False)
    for ax in axes.ravel()[len(SWEEP_METRICS):]:
        ax.set_visible(False)
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
            ax.set_xticks(xs, [_short(v, 24) for v in values], rotation=30, ha="right")
        ax.grid(alpha=0.3)
    fig.suptitle(f"system metrics against {param or 'point'} (mean of interval means, 95 % CI)")
    fig.tight_layout()
    name = "sweep_" + (param or "point").replace(".", "_").replace("/", "_")
    return _save(fig, out_dir, name)


def utility_boxes(points: list[dict]) -> int:
    """How many flows the utility diagram can draw a confidence box for: both goodput's and RTT's intervals known
    (with one repetition a flow's intervals are batch means at best, often none)."""
    return sum(1 for p in points for f in p.get("flows", []) if _box(f) is not None)


def _box(f: dict) -> tuple[float, float, float, float] | None:
    """(goodput low, high in Mbit/s, RTT low, high in ms) of a flow's intervals, or None without both."""
    g, r = f.get("goodput_bps") or {}, f.get("rtt_s") or {}
    gl, gh = g.get("ci95") or [None, None]
    rl, rh = r.get("ci95") or [None, None]
    if None in (gl, gh, rl, rh) or not (gh > gl or rh > rl):
        return None
    return gl * 1e-6, gh * 1e-6, rl * 1e3, rh * 1e3


NEAR = 0.03   # of the axes' span: labels closer than this to one another would overprint


def _near(a: tuple[float, float], b: tuple[float, float], xmax: float, ymax: float) -> bool:
    return abs(a[0] - b[0]) < NEAR * xmax and abs(a[1] - b[1]) < NEAR * ymax


def _places(flows: list[tuple[dict, float, float]], xmax: float, ymax: float) -> list[tuple[float, float, str]]:
    """One label a place: the flows of a setup near one another named together, by congestion control
    ("reno #0, #1"), at the first one's position. [(x, y, text)]"""
    groups: list[list] = []
    for f, x, y in flows:
        group = next((g for g in groups if _near((g[0][1], g[0][2]), (x, y), xmax, ymax)), None)
        if group is None:
            groups.append([(f, x, y)])
        else:
            group.append((f, x, y))
    out = []
    for members in groups:
        by: dict[str, list[str]] = {}
        for f, _, _ in members:
            name, number = flow_label(f).rsplit(" ", 1)
            by.setdefault(name, []).append(number)
        out.append((members[0][1], members[0][2], "; ".join(f"{cc} {', '.join(ns)}" for cc, ns in by.items())))
    return out


def _short(v, width: int = 40) -> str:
    """A swept value as a legend or an axis shows it: a long one (a whole `flows` list) cut to width, the point's
    number or its place on the axis tells it apart."""
    text = fmt_param(v)
    return text if len(text) <= width else text[:width - 1] + "…"


def plot_utility(points: list[dict], out_dir: Path) -> Path:
    """Keshav's utility diagram: per flow goodput against RTT, a colour per setup, each flow named by its
    congestion control, a box of its 95 % intervals where it has both (the title says how many)."""
    fig, ax = plt.subplots(figsize=(8, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = [[(f, f["goodput_bps"]["mean"] * 1e-6, f["rtt_s"]["mean"] * 1e3) for f in p.get("flows", [])
              if (f.get("goodput_bps") or {}).get("mean") is not None and (f.get("rtt_s") or {}).get("mean") is not None]
             for p in points]
    xmax = max((x for flows in drawn for _, x, _ in flows), default=0) or 1.0
    ymax = max((y for flows in drawn for _, _, y in flows), default=0) or 1.0
    placed: list[tuple[float, float]] = []   # every label so far: one near them goes above them
    for n, (p, flows) in enumerate(zip(points, drawn)):
        color = colors[n % len(colors)]
        params = ", ".join(f"{k}={_short(v)}" for k, v in p.get("params", {}).items())
        label = f"point {p['index']}" + (f": {params}" if params else "")
        for i, (f, x, y) in enumerate(flows):
            ax.plot([x], [y], "o", color=color, ms=3, label=label if i == 0 else None)
        for x, y, text in _places(flows, xmax, ymax):
            above = sum(1 for q in placed if _near(q, (x, y), xmax, ymax))
            placed.append((x, y))
            ha = "right" if x > 0.75 * xmax else "left" if x < 0.1 * xmax else "center"
            ax.annotate(text, (x, y), xytext=(0, 3 + 11 * above), textcoords="offset points", color=color,
                        fontsize=9, ha=ha, va="bottom")
        for f, _, _ in flows:
            box = _box(f)
            if box is not None:
                ax.add_patch(Rectangle((box[0], box[2]), box[1] - box[0], box[3] - box[2], fill=False,
                                       edgecolor=color, lw=1))
    boxes, flows = utility_boxes(points), sum(len(p.get("flows", [])) for p in points)
    ax.margins(0.08)
    ax.set_xlabel("goodput (Mbit/s)")
    ax.set_ylabel("mean smoothed RTT (ms)")
    ax.set_title("utility diagram: per flow" + (", boxes = 95 % CI of goodput and RTT" if boxes == flows else
                                                f", boxes = 95 % CI ({boxes} of {flows} flows have one)" if boxes
                                                else " (no confidence intervals: run more repetitions)"))
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
    names = {str(f["flow"]): flow_label(f) for f in point.get("flows", [])}
    for flow in flows:
        rows = [r for r in trace if r["flow"] == flow]
        t = [_num(r["t"]) for r in rows]
        name = names.get(flow, f"flow {flow}")
        axes[0].plot(t, [_num(r["cwnd"]) for r in rows], lw=0.8, label=name)
        axes[1].plot(t, [None if _num(r["srtt_s"]) is None else _num(r["srtt_s"]) * 1e3 for r in rows], lw=0.8,
                     label=name)
    events = fine_occupancy(rep_dir)
    for label, (t, qlen) in events.items():   # every change of the queue, where the monitor ran
        axes[2].step(t, qlen, where="post", lw=0.6, label=f"{label} (every change)")
    queues = sorted({(r.get("node", ""), r.get("dev", ""), r.get("handle", "")) for r in qdisc}) if not events else []
    for q in queues:
        rows = [r for r in qdisc if (r.get("node", ""), r.get("dev", ""), r.get("handle", "")) == q]
        if not any(_num(r.get("backlog_packets")) for r in rows):
            continue  # an idle qdisc says nothing and clutters the plot
        axes[2].step([_num(r["t"]) for r in rows], [_num(r.get("backlog_packets")) for r in rows], where="post",
                     lw=0.8, label=f"{q[0]}:{q[1]} {q[2]}")
    # the link events (events.csv: when each step was applied), marked on every panel and named on the top one
    for e in read_csv(rep_dir / "events.csv"):
        t = _num(e.get("t"))
        if t is None:
            continue
        for ax in axes:
            ax.axvline(t, color="grey", ls=":", lw=0.8)
        axes[0].annotate(f"{e.get('kind', '')} {e.get('link', '')}: {e.get('action', '')}", (t, 1.0),
                         xycoords=("data", "axes fraction"), rotation=90, fontsize=6, va="top", ha="right",
                         color="dimgrey")
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


def _queue_events(rep_dir: Path) -> tuple[dict, float]:
    """The queue monitor's raw events per watched qdisc (qdiscs/sojourn) and the time the repetition's traffic
    clock started (epoch seconds)."""
    rep = rep_dir / "repetition.json"
    if not rep.is_file():
        return {}, 0.0
    summary = json.loads(rep.read_text()).get("queue_monitor") or {}
    return (sojourn.read_events(rep_dir, summary) if summary else {}), summary.get("t0_epoch_s", 0.0)


def fine_occupancy(rep_dir: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Per watched qdisc: (time since the traffic clock started, packets queued after each event)."""
    events, t0 = _queue_events(rep_dir)
    return {label: (list(e.t - t0), list(e.qlen)) for label, e in events.items()}


def plot_sojourn_cdf(run_dir: Path, points: list[dict], repetition: int, out_dir: Path) -> Path | None:
    """The sojourn distribution of every watched qdisc, one line per point: FQ against FCFS as delay
    distributions, not only means."""
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    for p in points:
        events, _ = _queue_events(run_dir / "points" / f"{p['index']:03d}" / f"rep{repetition}")
        for label, e in events.items():
            values = sorted(e.sojourn_ns[e.kind == 1] / 1e6)
            n = len(values)
            if not n:
                continue
            name = f"point {p['index']} {fmt_param(p.get('params', {}))} {label}".strip()
            ax.step(values, [(i + 1) / n for i in range(n)], where="post", lw=1, label=name)
            drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("sojourn in the qdisc (ms)")
    ax.set_ylabel("fraction of packets")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return _save(fig, out_dir, "sojourn_cdf")


def plot_time_sequence(run_dir: Path, point: dict, repetition: int, out_dir: Path) -> list[Path]:
    """tcptrace's time-sequence graph for each flow that sent data through a captured link: first sends, the
    retransmissions marked, the cumulative ACK and the SACK blocks; its points also go to a CSV beside the PNG
    (kind, t, start, end), the figure's data source."""
    rep_dir = run_dir / "points" / f"{point['index']:03d}" / f"rep{repetition}"
    rep = rep_dir / "repetition.json"
    if not rep.is_file():
        return []
    capture = json.loads(rep.read_text()).get("capture") or {}
    t0 = (json.loads(rep.read_text()).get("queue_monitor") or {}).get("t0_epoch_s")
    out = []
    for link in capture.get("links", []):
        for k, ts in enumerate(sorted(pcap.time_sequences(rep_dir / link["file"]),
                                      key=lambda x: -len(x.data))[:4]):
            if len(ts.data) < 10:
                continue   # a control connection's few segments
            start = t0 if t0 is not None else min(t for t, _, _ in ts.data)
            name = f"timeseq_p{point['index']:03d}_{link['link']}_{k}"
            with open(out_dir / f"{name}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["kind", "t", "start", "end"])
                for kind, rows in (("data", ts.data), ("retransmit", ts.retransmits), ("sack", ts.sacks)):
                    w.writerows([kind, f"{t:.6f}", a, b] for t, a, b in rows)
                w.writerows(["ack", f"{t:.6f}", a, ""] for t, a in ts.acks)
            fig, ax = plt.subplots(figsize=(10, 6))
            ax.plot([t - start for t, _, _ in ts.data], [b / 1e6 for _, _, b in ts.data], ".", ms=1.5,
                    color="tab:blue", label="data (first send)")
            if ts.acks:
                ax.step([t - start for t, _ in ts.acks], [a / 1e6 for _, a in ts.acks], where="post", lw=0.7,
                        color="tab:green", label="cumulative ACK")
            if ts.sacks:
                ax.vlines([t - start for t, _, _ in ts.sacks], [a / 1e6 for _, a, _ in ts.sacks],
                          [b / 1e6 for _, _, b in ts.sacks], color="tab:purple", lw=1.2, label="SACK blocks")
            if ts.retransmits:
                ax.plot([t - start for t, _, _ in ts.retransmits], [b / 1e6 for _, _, b in ts.retransmits], "x",
                        ms=4, color="tab:red", label=f"retransmissions ({len(ts.retransmits)})")
            src, sport, dst, dport = ts.flow
            ax.set_title(f"point {point['index']}, {src}:{sport} -> {dst}:{dport}, captured at {link['link']}")
            ax.set_xlabel("time (s)")
            ax.set_ylabel("sequence number, relative (MB)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
            fig.tight_layout()
            out.append(_save(fig, out_dir, name))
    return out
