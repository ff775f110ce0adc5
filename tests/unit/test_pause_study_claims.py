"""Study 000's claims read against the Markov model itself: every spec point's goodput with and without PAUSE set
to the model's throughput for that point (its configured RTT, the paper's N), three repetitions a hair apart.

It checks what the claims were written for before any run judges them: each names points its specs sweep (no
claim is not-applicable), and the claims are fair to the model where the paper says the model and the
simulations agree (it holds them), while the two the paper states against the model say so."""
from functools import lru_cache

import yaml

from ccrig.analysis import pause_markov as pm
from ccrig.analysis.verdicts import Archive, evaluate
from ccrig.experiments import spec as specs
from ccrig.experiments.report import models
from ccrig.experiments.run.study_file import load, spec_path

# the model's own verdicts; every other claim holds on it
EXPECTED = {
    # the paper's simulations put the optimum at 70-80 % of B2; the model peaks at 90 % (T = 18: +5.0 against +2.8 %)
    "fig6-optimum-not-above-80": "fails",
    # the paper's N = 2 and N = 3 models differ by 0.9 points at RTT 1 s, inside the 1-point margin: "far greater
    # benefit" is the simulations' finding, not the model's
    "fig7-files-beat-bulk": "no-difference",
    # the simulations against the model: read on the model, the two are the same number (0 is not more than 1)
    "fig7-bulk-short-rtt-above-model": "fails",
}


@lru_cache(maxsize=None)
def throughputs(lam: tuple, t1: int, t2: int, rtt: float) -> tuple[float, float]:
    """The model's throughput (packets/s) with PAUSE at (T1, T2) and without it (T1 = B2)."""
    _, with_, without = pm.gain(pm.PauseParams(lam=lam, T1=t1, T2=t2, rtt=rtt))
    return with_.throughput, without.throughput


def reps(value: float) -> list[dict]:
    return [{"rep": r, "fidelity": {"verdict": "ok", "reasons": []},
             "system": {"goodput_bps": {"mean": value * (1 + 1e-5 * (r - 1))}}} for r in range(3)]


def model_points(folder, name: str) -> tuple[list[dict], dict[int, float]]:
    raw = yaml.safe_load(spec_path(folder, name).read_text())
    out, gains = [], {}
    for p in specs.points(raw, specs.validate(raw, name)):
        topo, flows = p.experiment.topology, p.raw["flows"]
        lam1 = topo.link_a.rate.bps(topo.wire) / (8 * topo.wire)
        bulk = all((f.get("workload") or {}).get("kind", "bulk") == "bulk" for f in flows)
        with_, without = throughputs(models.model_levels(lam1, bulk), topo.pause.high, topo.pause.t2, topo.rtt)
        gains[p.index] = 100 * (with_ - without) / without
        out.append({"index": p.index, "params": p.params, "system": {}, "repetitions": reps(with_),
                    "without_pause": {"repetitions": reps(without)}})
    return out, gains


def test_the_claims_read_on_the_model_itself():
    study, folder = load("pause")
    points, gains = {}, {}
    for s in study.specs:
        points[s.spec], gains[s.spec] = model_points(folder, s.spec)
    archive = Archive(points, lambda spec, point: gains[spec][point["index"]])
    verdicts = {c.id: evaluate(c, archive) for c in study.claims}
    got = {cid: v.verdict for cid, v in verdicts.items()}
    assert got == {c.id: EXPECTED.get(c.id, "holds") for c in study.claims}, \
        {cid: (v.verdict, v.measured, v.basis) for cid, v in verdicts.items()}
    # the two-sided bound of Fig. 5 holds for the model's own 7.2 % (the audit: a one-sided 5 points did not)
    assert abs(verdicts["fig5-difference-small"].values["q"]["mean"] - 0.928) < 0.002
