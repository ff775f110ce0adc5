"""Every claim of every study reads points its specs' sweeps have: each quantity's `at` names exactly one point of
the spec's full sweep (a path inside a swept value, as `flows[0].cc`, included), so a typo shows here and not as
a not-applicable verdict after a full run."""
import json

import pytest
import yaml

from ccrig.analysis.claims import quantities
from ccrig.analysis.verdicts import Archive
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import study_file as studymod


def _points(folder, name) -> list[dict]:
    raw, exp = specmod.load(studymod.spec_path(folder, name))
    # params as summary.json keeps them (JSON), with a stand-in result
    return [{"index": p.index, "params": json.loads(json.dumps(p.params)), "system": {}} for p in
            specmod.points(raw, exp, name)]


@pytest.mark.parametrize("name", sorted(studymod.find()))
def test_every_claim_names_one_point_of_its_spec(name):
    study, folder = studymod.load(name)
    archive = Archive({e.spec: _points(folder, e.spec) for e in study.specs})
    for claim in study.claims:
        along = getattr(claim.test, "along", None)
        for q in quantities(claim.test):
            if along is None:
                archive.point(q.spec, q.at)   # raises NotRun naming the problem
            else:   # a trend reads every point along its path
                assert [p for p in archive.points[q.spec] if along in p["params"]], (claim.id, along)


@pytest.mark.parametrize("name", sorted(studymod.find()))
def test_the_points_a_study_reads_are_those_its_claims_judge(name):
    """Study.reads (what the first pass gives k0 repetitions) holds every point a claim's verdict reads, and no
    other: the points only a figure shows keep their spec's own repetitions."""
    study, folder = studymod.load(name)
    points = {e.spec: _points(folder, e.spec) for e in study.specs}
    archive = Archive(points)
    judged = set()
    for claim in study.claims:
        along = getattr(claim.test, "along", None)
        for q in quantities(claim.test):
            if along is None:
                judged.add((q.spec, archive.point(q.spec, q.at)["index"]))
            else:
                values = {json.dumps(p["params"][along]) for p in points[q.spec]}
                judged |= {(q.spec, archive.point(q.spec, {**q.at, along: json.loads(v)})["index"]) for v in values}
    assert study.reads({s: {p["index"]: p["params"] for p in pts} for s, pts in points.items()}) == judged


def test_study_002s_buffers_axis_is_a_figure_apart_from_the_claims_three_points():
    """Fig. 7's curve is a spec of its own that no claim reads, so a --budget spends nothing on it; buffers holds
    the claims' points (and drop-tail at 100 packets, Figs 3-4's traces)."""
    study, folder = studymod.load("polynomial")
    pts = {s: _points(folder, s) for s in ("buffers", "buffers_curve")}
    read = study.reads({s: {p["index"]: p["params"] for p in v} for s, v in pts.items()})
    assert (len(pts["buffers"]), len(pts["buffers_curve"])) == (4, 20)
    assert sorted((s, *pts[s][i]["params"].values()) for s, i in read) == [
        ("buffers", "pfifo", "10pkt"), ("buffers", "red", "100pkt"), ("buffers", "red", "10pkt")]
    # the curve is the claims' experiment at every buffer: only its name, description and axis differ
    a, b = (yaml.safe_load((folder / "specs" / f"{s}.yaml").read_text()) for s in ("buffers", "buffers_curve"))
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ == {"name", "description", "sweep"} and a["sweep"]["topology.bottleneck.qdisc"] == b["sweep"][
        "topology.bottleneck.qdisc"]
    assert set(a["sweep"]["topology.bottleneck.buffer"]) < set(b["sweep"]["topology.bottleneck.buffer"])
