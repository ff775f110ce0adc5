"""The measurements beside the analytical models: each flow's goodput against the GAIMD and Mathis throughput
equations (analysis/throughput.py), and a PAUSE point's measured gain against the Markov model's
(analysis/pause_markov.py) for the same rates, buffers and thresholds."""
from __future__ import annotations

from pathlib import Path

import yaml

from ccrig.errors import InputError
from ccrig.tcp_modules.laws import AlphaBeta, Poly
from ccrig.tcp_modules.spec import law_of
from ccrig.topologies.named.pause_chain import ChainLink

from ccrig.analysis import pause_markov as pm
from ccrig.analysis import throughput as tp

MSS_BYTES = 1448  # payload of a 1500-byte Ethernet frame with TCP timestamps: the segment size of the predictions
MIN_RTO_S = 0.2  # Linux's minimum retransmission timeout; T0 for the GAIMD prediction is MIN_RTO_S + RTT
B1_PARAM = "topology.link_b.buffer"  # node 1's buffer B1 as a sweep names it


def gaimd_law(cc: str) -> tuple[float, float] | None:
    """(α, β kept) of a flow's congestion-control law when it is GAIMD-shaped, else None. `cc` is the flow's
    label in summary.json (tcp_modules.spec.cc_key): a kernel name, a preset, or a parameterisation's text."""
    if cc == "reno":
        return 1.0, 0.5
    try:
        law = law_of(cc)
    except InputError:
        return None  # a parameterisation's text, law(field=value,...), names its law but is not a cc value
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
                law = gaimd_law(str(f.get("cc")))
                if law:
                    row["law"] = law
                    row["gaimd_bps"] = tp.gaimd(loss, rtt, MIN_RTO_S + rtt, 1.0, law[0], law[1]) * MSS_BYTES * 8
            out.append(row)
    return out


def buffer_b1(run_dir: Path, point: dict) -> int | None:
    """B1 in packets: the point's own value when the sweep sets it, else the run's resolved spec.yaml's, read
    through the pause_chain's own link model. summary.json's PAUSE record holds B2 but not B1, hence the spec."""
    spec_path = run_dir / "spec.yaml"
    if not spec_path.is_file():
        return None
    try:
        link = dict((yaml.safe_load(spec_path.read_text()) or {}).get("topology", {}).get("link_b") or {})
        if B1_PARAM in point.get("params", {}):
            link["buffer"] = point["params"][B1_PARAM]
        if link.get("buffer") is None:
            return None
        return ChainLink.model_validate(link).buffer.packets
    except (yaml.YAMLError, AttributeError, TypeError, ValueError):   # pydantic's ValidationError is a ValueError
        return None


def bulk_only(run_dir: Path) -> bool | None:
    """Whether every flow of the run's resolved spec.yaml is always backlogged (no workload, or kind bulk);
    None when the spec cannot be read."""
    try:
        flows = (yaml.safe_load((run_dir / "spec.yaml").read_text()) or {}).get("flows")
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(flows, list) or not flows:
        return None
    return all(((f or {}).get("workload") or {}).get("kind", "bulk") == "bulk" for f in flows)


def model_levels(lam1: float | None, bulk: bool | None) -> tuple[float, ...] | None:
    """The rate levels the paper sets beside a scenario: N = 2, (λ1, 1), beside flows with idle times (Figs.
    4-6, Fig. 7's files); N = 3, (λ1, λ1/2, 1), beside always-backlogged flows (Fig. 7: "the more granular input
    traffic steps in the Markov model follows trends of the simulations without any idle times", λ2 = 25 at
    λ1 = 50). λ1/2 keeps that ratio at other λ1; λ1 ≤ 2 leaves no room for a middle level, hence N = 2."""
    if lam1 is None or bulk is None:
        return None
    return (lam1, lam1 / 2.0, 1.0) if bulk and lam1 / 2.0 > 1.0 else (lam1, 1.0)


def markov_params(run_dir: Path, point: dict):
    """The Markov model's parameters for a measured PAUSE point, in the study's units (packets/s at scale 1),
    with a note of the mapping; None when the point has no PAUSE record.

    λ levels: model_levels (λ1 = link A's rate, λ_N = 1; N as the paper sets it beside the point's traffic).
    RTT: the configured one (topology.rtt, at the study's time scale), as the paper's Fig. 4 puts the added
    link delay on its axis and into the model. Not the measured smoothed RTT: that adds B2's queueing (up to
    20 packets at ν, 1.3 s of the study's time) and moved the model's gain at 0.1 s from -0.002 % to +6.2 %.
    A chain without added delay (rtt 0) has no model RTT: the model is then not computed."""
    rec = point.get("pause")
    sc = (rec or {}).get("scaling") or {}
    if not rec or not sc.get("wire_bytes") or rec.get("high") is None:
        return None
    scale = float(sc.get("scale") or 1.0)
    pps = 8.0 * sc["wire_bytes"] * scale

    def rate(key):
        return sc[key] / pps if sc.get(key) else None

    rtt = sc.get("rtt_s")   # the configured RTT / scale of this point (pause_chain's scaling())
    lam1 = rate("link_a_bps")
    kw = {"lam1": lam1, "mu1": rate("link_b_bps"), "nu": rate("link_c_bps"),
          "mu2": rate("paused_bps"), "B1": buffer_b1(run_dir, point), "B2": rec.get("b2"), "T1": rec.get("high"),
          "T2": rec.get("low", rec.get("high")), "rtt": rtt * scale if rtt else None,
          "lam": model_levels(lam1, bulk_only(run_dir))}
    return kw


def pause_model(kw: dict) -> tuple[float | None, str, tuple | None]:
    """The Markov model's PAUSE gain (percent) for a point's parameters (markov_params), a note (why not, when
    None), and its §III-B measures with and without PAUSE (pause_markov.PauseMeasures, or None)."""
    missing = [k for k, v in kw.items() if v is None]
    if missing:
        return None, "model not computed: the archive lacks " + ", ".join(missing), None
    try:
        params = pm.PauseParams(lam=kw["lam"], mu1=kw["mu1"], mu2=kw["mu2"], nu=kw["nu"],
                                B1=kw["B1"], B2=kw["B2"], T1=kw["T1"], T2=kw["T2"], rtt=kw["rtt"])
        g, with_, without = pm.gain(params)
        return g, "", (with_, without)
    except InputError as e:
        return None, f"model not computed: {e}", None


def pause_model_gain(run_dir: Path, point: dict) -> float | None:
    """The model's gain for one measured point (a study's claims read it), None where it cannot be computed."""
    kw = markov_params(run_dir, point)
    return None if kw is None else pause_model(kw)[0]


def measured_losses(reps: list[dict]) -> dict[str, float | None]:
    """P1 and P2 as §III-B defines them (a queue's drops per packet arriving at it), from each repetition's qdisc
    counters on node 1 (B1) and node 2 (B2), pooled over the repetitions; None where a queue saw no packet."""
    out = {}
    for name, q in (("P1", "node1"), ("P2", "node2")):
        dropped = sent = 0
        for r in reps:
            c = ((r.get("pause") or {}).get("queues") or {}).get(q) or {}
            dropped, sent = dropped + (c.get("dropped") or 0), sent + (c.get("sent_packets") or 0)
        out[name] = dropped / (dropped + sent) if dropped + sent else None
    return out


def utilisation(point: dict) -> float | None:
    """Goodput over link C's payload capacity (T_max): the measured counterpart of the model's throughput / ν."""
    g = ((point.get("system") or {}).get("goodput_bps") or {}).get("mean")
    t = point.get("t_max_bps")
    return g / t if g is not None and t else None


def pause_rows(run_dir: Path, points: list[dict]) -> list[dict]:
    """Per PAUSE point: the measured gain beside the model's, and the model's loss probabilities and link C
    utilisation (§III-B) beside the measured ones, with PAUSE and without it."""
    rows = []
    for p in points:
        kw = markov_params(run_dir, p)
        measured = p.get("pause_gain")
        if kw is None or not measured:
            continue
        model, note, m = pause_model(kw)
        base = p.get("without_pause") or {}
        side = {"with": {**measured_losses(p.get("repetitions") or []), "util": utilisation(p)},
                "without": {**measured_losses(base.get("repetitions") or []), "util": utilisation(base)}}
        if m is not None:
            for key, meas in zip(("with", "without"), m):
                side[key].update(model_P1=meas.P1, model_P2=meas.P2, model_util=meas.throughput / kw["nu"])
        rows.append({"point": p["index"], "params": p.get("params", {}), "measured": measured.get("percent"),
                     "ci95": measured.get("ci95"), "model": model, "kw": kw, "note": note, "measures": side})
    return rows
