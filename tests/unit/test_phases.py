"""An on/off source's phases judged apart (Keshav's scenario 3 tabulates the background on and off apart): each
interval is on, off or neither by the source's own schedule (summary.interval_phases), a repetition's metrics
are computed over each phase (summary.by_phase), and a claim's quantity reads one with `phase:`."""
import pytest

from ccrig.analysis.claims import Claim, Quantity
from ccrig.analysis.verdicts import Archive, NotRun, evaluate
from ccrig.experiments.run import summary
from ccrig.experiments.workloads import Flow
from ccrig.experiments.workloads.bulk import Bulk
from ccrig.experiments.workloads.onoff import OnOff

T0 = 1000.0


def test_each_interval_is_on_off_or_neither_by_the_schedule():
    # on 0.5-3.2 s and 6-10 s after t0 (two sources overlapping in the second): 1 s intervals; an interval counts
    # when the one before it was in the same phase too (the source's packets still queued after a switch)
    periods = [(T0 + 0.5, T0 + 3.2), (T0 + 6.0, T0 + 8.0), (T0 + 7.5, T0 + 10.0)]
    got = summary.interval_phases(periods, T0, 1.0, 11)
    assert got == [None, None, "on", None, None, "off", None, "on", "on", "on", None]
    # a switch within the edge (under a packet of the slowest source) leaves the intervals whole
    assert summary.interval_phases([(T0 - 1.005, T0 + 1.996)], T0, 1.0, 2) == ["on", "on"]
    assert summary.interval_phases([], T0, 1.0, 2) == ["off", "off"]


def _flows():
    ftp = Bulk()
    bkg = OnOff.model_validate({"rate": "50pps", "size": "972b", "on": "3s", "off": "3s"})
    return [Flow(w, i, "reno", "reno", f"s{i}", f"d{i}", 0.0, 12.0) for i, w in enumerate([ftp, bkg])]


def _rows(values):
    return [{"goodput_bps": v, "throughput_bps": v} for v in values]


def test_a_repetition_has_its_metrics_per_phase():
    flows = _flows()
    # the background on 0-3 s and 6-9 s (from before t0): the FTP gets 100 with it on, 300 with it off, 200 in
    # the interval after a switch; interval 0 is warm-up
    ftp = [999, 100, 100, 200, 300, 300, 200, 100, 100, 200, 300, 300]
    bkg = [50, 50, 50, 10, 0, 0, 40, 50, 50, 10, 0, 0]
    results = {0: None, 1: {"sender": {"on": [[T0 - 1, T0 + 3.0], [T0 + 6.0, T0 + 9.0]]}}}
    rows = {0: _rows(ftp), 1: _rows(bkg)}
    system = _rows([a + b for a, b in zip(ftp, bkg)])
    got = summary.by_phase(flows, results, T0, 1.0, 1, rows, system)["phases"]
    assert got["on"]["intervals"] == [1, 2, 7, 8] and got["off"]["intervals"] == [4, 5, 10, 11]
    assert got["on"]["flows"][0]["goodput_bps"]["mean"] == pytest.approx(100)
    assert got["off"]["flows"][0]["goodput_bps"]["mean"] == pytest.approx(300)
    assert got["on"]["system"]["goodput_bps"]["mean"] == pytest.approx(150)
    # no on/off source: no phases
    assert summary.by_phase(flows[:1], {0: None}, T0, 1.0, 1, {0: rows[0]}, system) == {}


def _stat(v):
    return {"mean": v, "ci95": None, "ci": {"method": "batches"}}


def _rep(r, on, off, whole):
    """A repetition: flows 0-1 FTPs, 2 the background; values per phase as (ftp, background)."""
    def part(ftp, bkg):
        return {"system": {"goodput_bps": _stat(2 * ftp + bkg)},
                "flows": [{"flow": 0, **{"goodput_bps": _stat(ftp)}}, {"flow": 1, "goodput_bps": _stat(ftp)},
                          {"flow": 2, "goodput_bps": _stat(bkg)}]}
    return {"rep": r, "fidelity": {"verdict": "ok", "reasons": []}, **part(*whole),
            "phases": {"on": part(*on), "off": part(*off)}}


POINT = {"index": 0, "params": {"q": "pfifo"}, "system": {}, "flows": [{"flow": i, "cc": "reno"} for i in range(3)],
         "repetitions": [_rep(r, (220 + r, 490 - r), (500 - r, r), (360, 245)) for r in range(3)]}


def _claim(test):
    return Claim.model_validate({"id": "c", "paper": "says so", "test": test})


def test_a_claim_reads_the_background_on_and_off_apart():
    a = Archive({"s3": [POINT]})
    bkg = {"spec": "s3", "flows": [2], "phase": "on"}
    ftps = {"spec": "s3", "flows": [0, 1], "phase": "on"}
    # on: the background takes more than the FTPs; over the whole run it would not look so
    assert evaluate(_claim({"kind": "compare", "a": bkg, "op": ">", "b": ftps}), a).verdict == "holds"
    v = evaluate(_claim({"kind": "compare", "a": {**bkg, "phase": "off"}, "op": ">",
                         "b": {**ftps, "phase": "off"}}), a)
    assert v.verdict == "fails"
    # a share within the phase divides by the phase's own delivery
    v = evaluate(_claim({"kind": "within", "q": {"spec": "s3", "flows": [0, 1], "share": True, "phase": "off"},
                         "value": 0.5, "tol": 0.01}), a)
    assert v.verdict == "holds"


def test_a_phase_without_phases_is_not_applicable_and_a_workload_record_has_none():
    no_phases = {**POINT, "repetitions": [{k: v for k, v in r.items() if k != "phases"}
                                          for r in POINT["repetitions"]]}
    v = evaluate(_claim({"kind": "bound", "op": ">", "value": 0,
                         "q": {"spec": "s3", "flows": [0], "phase": "off"}}), Archive({"s3": [no_phases]}))
    assert v.verdict == "not-applicable"
    q = Quantity(spec="s3", flows=[1], metric="interactive.latency_s.mean", phase="on")
    assert "has no phases" in q.problem()
    with pytest.raises(NotRun):
        Archive({"s3": [no_phases]}).value(Quantity(spec="s3", flows=[0], phase="on"))


def test_a_point_is_named_by_a_path_inside_a_swept_value():
    # a spec sweeping whole flow lists (JK, then Generic): `flows[0].cc` picks one
    jk = [{"count": 6, "cc": "reno"}, {"count": 2, "cc": "reno"}]
    g = [{"count": 6, "cc": {"law": "alphabeta", "alpha": 5, "beta": 0.99}}, {"count": 2, "cc": "reno"}]
    points = [{"index": i, "params": {"flows": f, "q": q}, "system": {}}
              for i, (f, q) in enumerate([(jk, "pfifo"), (jk, "fq"), (g, "pfifo"), (g, "fq")])]
    a = Archive({"s2": points})
    assert a.point("s2", {"flows[0].cc": "reno", "q": "fq"})["index"] == 1
    assert a.point("s2", {"flows[0].cc.law": "alphabeta", "q": "pfifo"})["index"] == 2
    assert a.point("s2", {"flows[0].cc.alpha": 5, "q": "fq"})["index"] == 3
    for at in ({"flows[0].cc": "cubic", "q": "fq"}, {"flows[2].cc": "reno", "q": "fq"}, {"flows[0].cc": "reno"}):
        with pytest.raises(NotRun):
            a.point("s2", at)
