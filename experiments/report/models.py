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

    rtt = ((point.get("system") or {}).get("rtt_s") or {}).get("mean")
    kw = {"lam1": rate("link_a_bps"), "mu1": rate("link_b_bps"), "nu": rate("link_c_bps"),
          "mu2": rate("paused_bps"), "B1": buffer_b1(run_dir, point), "B2": rec.get("b2"), "T1": rec.get("high"),
          "T2": rec.get("low", rec.get("high")), "rtt": None if rtt is None else rtt * scale}
    return kw


def pause_model(kw: dict) -> tuple[float | None, str]:
    """The Markov model's PAUSE gain (percent) for a point's parameters (markov_params), or None and why not."""
    missing = [k for k, v in kw.items() if v is None]
    if missing:
        return None, "model not computed: the archive lacks " + ", ".join(missing)
    try:
        params = pm.PauseParams(lam=(kw["lam1"], 1.0), mu1=kw["mu1"], mu2=kw["mu2"], nu=kw["nu"],
                                B1=kw["B1"], B2=kw["B2"], T1=kw["T1"], T2=kw["T2"], rtt=kw["rtt"])
        return pm.gain(params)[0], ""
    except InputError as e:
        return None, f"model not computed: {e}"


def pause_model_gain(run_dir: Path, point: dict) -> float | None:
    """The model's gain for one measured point (a study's claims read it), None where it cannot be computed."""
    kw = markov_params(run_dir, point)
    return None if kw is None else pause_model(kw)[0]


def pause_rows(run_dir: Path, points: list[dict]) -> list[dict]:
    rows = []
    for p in points:
        kw = markov_params(run_dir, p)
        measured = p.get("pause_gain")
        if kw is None or not measured:
            continue
        model, note = pause_model(kw)
        rows.append({"point": p["index"], "params": p.get("params", {}), "measured": measured.get("percent"),
                     "ci95": measured.get("ci95"), "model": model, "kw": kw, "note": note})
    return rows
