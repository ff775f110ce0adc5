"""experiments/run/engine.py's admission: pairs start in their order while their costs fit the measured capacity;
a pair costlier than the capacity, or one to run again alone, starts only when nothing runs, and nothing starts
beside it; how many slots `auto` opens; what a pair costs. reruns.py: a spoiled attempt moved aside and its pair
run again (alone after running beside others), then given up on."""
import json
import math

import pytest

from ccrig.analysis.samples import spoiled
from ccrig.experiments.run import engine, fidelity
from ccrig.experiments.run import reruns as reruns_mod
from ccrig.experiments.run.archive import RunArchive
from ccrig.experiments.run.reruns import Reruns
from ccrig.experiments.spec import points, validate


def queue(costs: dict, capacity: float, order=None) -> engine._Queue:
    return engine._Queue(order or list(costs), lambda pair: costs[pair], capacity)


def start(q: engine._Queue, free: list[int]) -> list:
    """What the engine starts now: the waiting pairs, in order, as long as the first one fits."""
    started = []
    while q.next_fits(free):
        (pair, alone), slot = q.waiting.pop(0), free.pop(0)
        q.running[pair] = [pair, None, slot, q.cost(pair), alone, bool(q.running)]
        started.append(pair)
    return started


def test_pairs_start_while_their_costs_fit_and_in_order():
    q = queue({(0, 0): 10, (0, 1): 10, (1, 0): 25, (0, 2): 10}, capacity=40)
    # the 25 does not fit beside two 10s (45 > 40): it waits, and the 10 behind it waits too (order kept)
    assert start(q, [0, 1, 2, 3]) == [(0, 0), (0, 1)]
    q.running.pop((0, 0))
    assert start(q, [2, 3]) == [(1, 0)]   # 10 + 25 fits
    assert start(q, [3]) == []            # 45 would not


def test_a_pair_costlier_than_the_capacity_runs_alone():
    q = queue({(0, 0): 5, (1, 0): 100, (0, 1): 5}, capacity=40)
    assert start(q, [0, 1, 2]) == [(0, 0)]
    q.running.clear()
    assert start(q, [0, 1, 2]) == [(1, 0)]    # nothing running: it starts whatever it costs
    assert start(q, [1, 2]) == []             # and nothing starts beside it
    q.running.clear()
    assert start(q, [0, 1, 2]) == [(0, 1)]


def test_a_pair_run_again_alone_waits_for_the_others_and_keeps_them_out():
    q = queue({(0, 0): 1, (0, 1): 1, (0, 2): 1, (0, 3): 1}, capacity=math.inf)
    assert start(q, [0, 1]) == [(0, 0), (0, 1)]
    q.running.pop((0, 0))
    q.again((0, 0), engine.ALONE)             # last in line: the others go first, side by side
    assert start(q, [0]) == [(0, 2)]
    q.running.clear()
    assert start(q, [0, 1]) == [(0, 3)]       # and still before the lone pair
    q.running.pop((0, 3))
    q.again((0, 3), engine.ALONE)
    assert start(q, [0, 1]) == [(0, 0)]       # nothing else waiting: the lone pairs, one after another
    assert q.running[(0, 0)][4] is True
    assert start(q, [1]) == []
    q.running.clear()
    q.again((0, 1), engine.AGAIN)             # run again as any pair: first in line, beside others
    assert start(q, [0, 1]) == [(0, 1)]       # (0, 3) behind it must run alone
    q.running.clear()
    assert start(q, [0, 1]) == [(0, 3)] and q.running[(0, 3)][4] is True


def _points(rates: list[str]):
    raw = {"name": "a", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt"}},
           "flows": [{"cc": "cubic", "count": 2}], "duration": "5s",
           "sweep": {"topology.bottleneck.rate": rates}}
    return points(raw, validate(raw, "a.yaml"), "a.yaml")


def test_cost_follows_the_packet_rate_and_the_flows():
    ten, hundred = (p.experiment for p in _points(["10mbit", "100mbit"]))
    assert 8 < engine.pair_cost(hundred) / engine.pair_cost(ten) < 10   # the flows' own cost does not scale
    # 10 Mbit/s of 1514-byte frames over the dumbbell's three hops, and two flows
    assert engine.pair_cost(ten) == 10e6 / (8 * 1514) * 3 + 2 * engine.FLOW_PPS


def test_random_loss_bounds_a_tcp_pairs_cost_below_its_bottleneck():
    # study 001's 100 Mbit/s point: 30 flows, 500 ms RTT, PER 0.01 on the sinks' link. Mathis: 12.2 segments per
    # RTT, 24.5 packets/s a flow; six times that for 30 flows is 4409/s against the bottleneck's 8256
    raw = {"name": "a", "topology": {"name": "dumbbell", "bottleneck": {"rate": "100mbit", "buffer": "50pkt"},
                                     "rtt": "500ms", "pairs": 1, "loss": 0.01},
           "flows": [{"cc": "reno", "count": 30}], "duration": "5s"}
    exp = validate(raw, "a.yaml")
    hops = len(exp.topology.build(30).path("s1", "d1"))
    assert engine.pair_pps(exp) == pytest.approx(30 * engine.LOSS_HEADROOM * (1.5 / 0.01) ** 0.5 / 0.5 * hops)
    # more loss, less cost; no delay or no loss: the bottleneck again; a UDP flow is not held back by loss
    assert engine.pair_pps(validate({**raw, "topology": {**raw["topology"], "loss": 0.1}}, "a.yaml")) < \
        engine.pair_pps(exp) / 3
    for topology in ({**raw["topology"], "rtt": "0ms"}, {**raw["topology"], "loss": 0.0}):
        assert engine.pair_pps(validate({**raw, "topology": topology}, "a.yaml")) == \
            pytest.approx(100e6 / (8 * 1514) * hops)
    udp = {**raw, "flows": [{"cc": "reno", "count": 29}, {"workload": {"kind": "cbr", "rate": "1mbit"}}]}
    assert engine.pair_pps(validate(udp, "a.yaml")) == pytest.approx(100e6 / (8 * 1514) * hops)


def test_auto_slots_from_the_capacity_and_the_cheapest_point():
    pts = _points(["10mbit", "300mbit"])
    cost = engine.pair_cost(pts[0].experiment)
    assert engine.slots(pts, True, 3.5 * cost) == 3
    assert engine.slots(pts, True, 1e9) == engine.MAX_JOBS
    assert engine.slots(pts, True, 0.5 * cost) == 1
    assert engine.slots(pts, False, 1e9) == 1            # a testbed that cannot run two side by side
    assert engine.slots(pts, True, None) == 1            # no calibration: one at a time


def test_softirq_and_stolen_shares_between_two_readings():
    a = {"cpu": (100, 1000, 10, 0), "cpu0": (50, 500, 5, 0)}
    b = {"cpu": (300, 1200, 60, 80), "cpu0": (250, 700, 55, 80)}
    assert fidelity.busy_between(a, b) == {"cpu": 1.0, "cpu0": 1.0}
    assert fidelity.busy_between(a, b, 2) == {"cpu": 0.25, "cpu0": 0.25}
    assert fidelity.busy_between(a, b, 3) == {"cpu": 0.4, "cpu0": 0.4}
    now = fidelity.cpu_times()
    assert all(len(v) == 4 and v[2] <= v[0] <= v[1] and v[3] <= v[0] for v in now.values())


# --- reruns (experiments/run/reruns.py) ---------------------------------------------------------------------

LIMITED = {"fidelity": {"verdict": "testbed-limited", "reasons": ["the machine was busy"]}}
OK = {"fidelity": {"verdict": "ok", "reasons": []}}


def _attempt(archive, pair, record) -> dict:
    """What a repetition leaves in its folder before the run judges it."""
    (archive.rep_dir(*pair) / "intervals.csv").write_text("t\n")
    return json.loads(json.dumps(record))


def test_a_spoiled_attempt_is_moved_aside_and_rerun_alone_then_given_up(tmp_path):
    (tmp_path / "run").mkdir()
    archive, summary, said = RunArchive(tmp_path / "run"), {}, []
    reruns = Reruns(archive, summary, said.append)
    # beside others and limited: alone; a kernel fault alone: as any other pair
    assert reruns.judge((0, 0), _attempt(archive, (0, 0), LIMITED), beside=True) == engine.ALONE
    fault = {**OK, "kernel_fault": [{"flow": 1}]}
    assert reruns.judge((0, 1), _attempt(archive, (0, 1), fault), beside=False) == engine.AGAIN
    moved = archive.path / "points/000/excluded/attempt1-rep0"
    assert (moved / "intervals.csv").is_file() and not (archive.path / "points/000/rep0").exists()
    kept = json.loads((moved / "repetition.json").read_text())
    assert kept["rep"] == 0 and kept["excluded"].startswith("fidelity testbed-limited") and kept["ran_beside_others"]
    assert [(r["rep"], r["attempt"], r["rerun"]) for r in summary["reruns"]] == [(0, 1, "alone"), (1, 1, "as any pair")]
    # the second attempt is good: it stands, saying it was the second
    good = _attempt(archive, (0, 0), OK)
    assert reruns.judge((0, 0), good, beside=False) is None and good["attempt"] == 2
    # spoiled every time: after RERUNS reruns the last attempt stays and the point is unmeasurable
    for n in range(reruns_mod.RERUNS - 1):   # its first attempt was spoiled above
        assert reruns.judge((0, 1), _attempt(archive, (0, 1), fault), beside=False) == engine.AGAIN
    assert reruns.judge((0, 1), _attempt(archive, (0, 1), fault), beside=False) is None
    assert (archive.path / "points/000/rep1/intervals.csv").is_file()
    assert len(list((archive.path / "points/000/excluded").iterdir())) == 1 + reruns_mod.RERUNS
    assert reruns.unmeasurable(0) == [f"repetition 1 was spoiled in {reruns_mod.RERUNS + 1} attempts, the last: "
                                      f"{spoiled(fault)}"]
    assert spoiled(fault).startswith("kernel_fault: the BPF struct_ops fault hit flow(s) 1")
    assert summary["reruns"][-1]["kept"].startswith("as the pair's record") and reruns.unmeasurable(1) == []


def test_what_a_rerun_says_names_the_spec(tmp_path):
    """A study runs its specs side by side and their points share numbers: each line says whose pair it is."""
    (tmp_path / "run").mkdir()
    archive, said = RunArchive(tmp_path / "run"), []
    reruns = Reruns(archive, {}, said.append, limit=0, name="per_10mbit")
    assert reruns.judge((2, 1), _attempt(archive, (2, 1), LIMITED), beside=False) is None
    assert said == [f"warning: per_10mbit point 2 repetition 1 spoiled in 1 attempts ({spoiled(LIMITED)}); its "
                    "point is unmeasurable"]


def test_a_kernel_fault_beside_others_runs_again_as_any_pair_then_alone(tmp_path):
    (tmp_path / "run").mkdir()
    archive, summary = RunArchive(tmp_path / "run"), {}
    reruns = Reruns(archive, summary, lambda line: None)
    fault = {**OK, "kernel_fault": [{"flow": 3}]}
    assert reruns.judge((2, 0), _attempt(archive, (2, 0), fault), beside=True) == engine.AGAIN
    assert reruns.judge((2, 0), _attempt(archive, (2, 0), fault), beside=True) == engine.ALONE
    # a collector that fell behind beside others: alone at once (the load is the likely cause)
    behind = {**OK, "cross_check": [{"flow": 0, "collector_vs_iperf3": -0.2, "collector_in_flight_bytes": 0}]}
    assert reruns.judge((2, 1), _attempt(archive, (2, 1), behind), beside=True) == engine.ALONE
    assert [r["rerun"] for r in summary["reruns"]] == ["as any pair", "alone", "alone"]


def test_a_pair_the_path_refused_runs_again_as_any_pair_then_fails(tmp_path):
    """A flow whose handshake the path's loss kept from opening (PathError): the attempt goes aside and the pair
    runs again, not alone (the machine did not refuse it); refused 1 + RERUNS times, it fails."""
    (tmp_path / "run").mkdir()
    archive, summary, said = RunArchive(tmp_path / "run"), {}, []
    reruns = Reruns(archive, summary, said.append)
    why = "iperf3 flow 17 (s1 -> d1, cc reno): unable to connect stream: Connection timed out"
    _attempt(archive, (3, 2), OK)
    assert reruns.refused((3, 2), why, beside=True) == engine.AGAIN
    moved = archive.path / "points/003/excluded/attempt1-rep2"
    assert (moved / "intervals.csv").is_file() and not (archive.path / "points/003/rep2").exists()
    assert json.loads((moved / "repetition.json").read_text())["excluded"] == f"the path refused it: {why}"
    assert summary["reruns"][0]["rerun"] == "as any pair" and "unable to connect stream" in said[0]
    for _ in range(reruns_mod.RERUNS - 1):
        assert reruns.refused((3, 2), why, beside=False) == engine.AGAIN   # its folder need not exist
    assert reruns.refused((3, 2), why, beside=False) is None
    assert len(summary["reruns"]) == reruns_mod.RERUNS and reruns.unmeasurable(3) == []


def test_a_pair_the_path_refused_runs_again_where_a_spoiled_one_would_not(tmp_path):
    """A study's --quick runs nothing again (limit 0): a spoiled pair is kept, unmeasurable; a refused one has no
    record to keep and runs again as in a full run."""
    (tmp_path / "run").mkdir()
    archive, summary = RunArchive(tmp_path / "run"), {}
    reruns = Reruns(archive, summary, lambda line: None, limit=0)
    why = "iperf3 flow 15's connection from s1 was in retransmission-timeout backoff after 36 s"
    assert reruns.refused((1, 0), why, beside=False) == engine.AGAIN
    spoiled = {**OK, "fidelity": {"verdict": "testbed-limited", "reasons": ["delay line r1->s1 late"]}}
    assert reruns.judge((2, 0), _attempt(archive, (2, 0), spoiled), beside=False) is None
    assert reruns.unmeasurable(2) and not reruns.unmeasurable(1)


def test_an_excluded_attempts_samples_leave_the_closed_log(tmp_path):
    (tmp_path / "run").mkdir()
    archive, summary = RunArchive(tmp_path / "run"), {"points": []}
    reruns = Reruns(archive, summary, lambda line: None)
    assert reruns.judge((1, 0), _attempt(archive, (1, 0), LIMITED), beside=True, started=100.0) == engine.ALONE
    end = summary["reruns"][0]["excluded_at"]
    line = lambda point, rep, ts: json.dumps({"name": "g", "labels": {"point": point, "rep": rep}, "value": 1,
                                              "ts": ts})
    log = archive.path / "samples.jsonl"
    # the attempt's own (point 1, rep 0, while it ran); another pair's at the same time; the rerun's, after
    log.write_text("\n".join([line("1", "0", 101.0), line("1", "0", 102.0), line("0", "0", 101.0),
                              line("1", "1", 101.0), line("1", "0", end + 5)]) + "\n")
    assert reruns.drop_samples(log) == 2
    assert [json.loads(x)["ts"] for x in log.read_text().splitlines()] == [101.0, 101.0, end + 5]
    assert summary["excluded_samples_dropped"] == 2
    assert json.loads((archive.path / "summary.json").read_text())["excluded_samples_dropped"] == 2


def test_no_pair_starts_once_the_deadline_has_passed_and_a_rerun_asked_after_it_waits_too(monkeypatch):
    # a study's --budget (runner.Options.until): one_at_a_time checks stop() before each pair, a rerun included
    clock, ran = [0.0], []

    def run(unit, lent):
        ran.append(unit)
        clock[0] += 10.0
        return {"rep": unit[1]}
    monkeypatch.setattr(engine.repetition, "run", run)
    asked = []

    def finished(pair, entry, error, beside):
        asked.append(pair)
        return engine.AGAIN if pair == (0, 1) and asked.count(pair) == 1 else None
    engine.one_at_a_time([(0, 0), (0, 1), (0, 2), (0, 3)], lambda pair: pair, lambda pair: None, finished,
                         stop=lambda: clock[0] >= 30.0)
    assert ran == [(0, 0), (0, 1), (0, 1)]   # the third start would be at 30 s: (0, 2) and (0, 3) never ran


@pytest.mark.parametrize("limit, rates, capacity", [
    # 200 Mbit/s a pair fails on a margin (softirq 0.511 on kernel v1272): the round halfway between decides
    (160e6, ["100mbit", "200mbit", "150mbit"], "150mbit"),
    (120e6, ["100mbit", "200mbit", "150mbit"], "100mbit"),
    (350e6, ["100mbit", "200mbit", "400mbit", "300mbit"], "300mbit"),
    (900e6, ["100mbit", "200mbit", "400mbit", "800mbit"], "800mbit"),   # four rounds at most
    (30e6, ["100mbit", "50mbit", "25mbit", "37mbit"], "25mbit"),
    (10e6, ["100mbit", "50mbit", "25mbit", "12mbit"], "12mbit"),   # no round passed: the last one, not passed
])
def test_the_calibration_bisects_once_between_a_pass_and_a_fail(monkeypatch, tmp_path, limit, rates, capacity):
    from ccrig.experiments.run import calibration

    def round_at(rate: str, out, prefix) -> dict:   # a machine that carries pairs up to `limit` each
        bps = float(rate.removesuffix("mbit")) * 1e6
        return {"rate": rate, "offered_pps": bps / 1e4, "goodput_of_t_max": 0.99 if bps <= limit else 0.95,
                "softirq_busiest_core": 0.2}
    monkeypatch.setattr(calibration, "_round", round_at)
    record = calibration.measure(tmp_path / "cal", "ccrig-test")
    assert [r["rate"] for r in record["rounds"] if not r.get("repeated")] == rates
    # every round that failed was measured once more, the first kept beside it
    again = [r["rate"] for r in record["rounds"] if r.get("repeated")]
    assert again == [r["rate"] for r in record["rounds"] if not r["passed"] and not r.get("repeated")]
    assert record["capacity_pps"] == float(capacity.removesuffix("mbit")) * 1e6 / 1e4
    assert record["passed"] == (limit >= 12e6)


def test_a_round_a_busy_moment_spoiled_is_measured_again_before_it_counts(monkeypatch, tmp_path):
    """2026-12-05, just after `make deps`: 100 Mbit/s a pair read 0.977 of T_max, and the capacity halved."""
    from ccrig.experiments.run import calibration
    seen: list[str] = []

    def round_at(rate: str, out, prefix) -> dict:   # carries 150 Mbit/s a pair; the very first round is busy
        seen.append(rate)
        bps = float(rate.removesuffix("mbit")) * 1e6
        ok = bps <= 160e6 and len(seen) > 1
        return {"rate": rate, "offered_pps": bps / 1e4, "goodput_of_t_max": 0.99 if ok else 0.977,
                "softirq_busiest_core": 0.2}
    monkeypatch.setattr(calibration, "_round", round_at)
    record = calibration.measure(tmp_path / "cal", "ccrig-test")
    assert seen == ["100mbit", "100mbit", "200mbit", "200mbit", "150mbit"]
    assert [(r["rate"], r["passed"], r.get("repeated", False)) for r in record["rounds"]][:2] == [
        ("100mbit", False, True), ("100mbit", True, False)]
    assert record["capacity_pps"] == 150e6 / 1e4 and record["passed"]
