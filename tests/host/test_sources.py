"""The traffic sources on a real dumbbell (experiments/workloads/: poisson, onoff, flood, cbr,
interactive): the physics checked from the receiver's own log (the kernel's receive timestamps of every packet),
not from what the sender meant to do."""
import itertools
import json
import math
import random
import statistics

import pytest

from conftest import dumbbell, leftovers
from support.machine import STEAL, again_while_busy, machine_limited
from ccrig.experiments.nodes import sources
from ccrig.experiments.run import schedule


def _packets(ccrig, flow: int) -> list[list[float]]:
    """[seq, t_send, t_recv, bytes] of every packet the flow's receiver logged, in arrival order."""
    path = ccrig.run_dirs()[-1] / f"points/000/rep0/receiver-{flow}.jsonl"
    return [p for line in path.read_text().splitlines() for p in json.loads(line)["p"]]


def _late_share(packets: list[list[float]], rng: random.Random, pps: float, by: float) -> float:
    """The share of packets sent more than `by` seconds after the schedule sources.py drew from the same seed
    (each packet's number is its place in the schedule; the clocks' offset is the median's)."""
    due = list(itertools.islice(sources.poisson_times(pps, math.inf, rng), max(r[0] for r in packets) + 1))
    lateness = [r[1] - due[int(r[0])] for r in packets]
    offset = statistics.median(lateness)
    return sum(x - offset > by for x in lateness) / len(lateness)


def _rep(ccrig) -> dict:
    return ccrig.summary()["points"][0]["repetitions"][0]


def test_poisson_has_exponential_gaps_at_its_mean_rate(ccrig):
    # 1000 packets/s for 15 s: ~15000 gaps, so chance moves the mean rate by 0.8 % (1/sqrt(n), 3 % is 3.7
    # sigma). The law is judged by its tail, P(gap > k mean) = exp(-k): chance moves it by 0.004 at most (0.03
    # is 7 sigma) and, idle, the receiver's clock reads within 0.013 of it. Not by the CV: one stall of the CPU
    # (35-60 ms on a busy 2-core machine, even at real-time priority) adds (50/1)^2 / 15000 = 0.17 to CV^2 at
    # a 1 ms mean gap. Stalls move the tails too: a packet the sender sent late (it catches up at once) changes
    # the two gaps beside it, so each tail may move by twice the share of late packets more. That share is read
    # from this run (each packet's send stamp against the seeded schedule it was due at), not assumed: on a host
    # whose hypervisor took 20-40 % of the CPU, 4 % of the gaps moved past the tail at half the mean.
    # A run whose late share passes the guard is measured again (a spell of steal passes; CI read 7.4 %).
    seed = 7

    def attempt():
        p = ccrig.run(dumbbell([{"workload": {"kind": "poisson", "rate": "1000pps", "size": "100b"}}],
                               duration="15s", rate="100mbit", seed=seed))
        assert p.returncode == 0, p.stderr
        packets = _packets(ccrig, 0)
        return packets, _late_share(packets, random.Random(schedule.flow_seed(seed, 0, 0, 0)), 1000, 0.5e-3)

    packets, late = again_while_busy(attempt, lambda got: f"{got[1]:.1%} of packets sent late" if got[1] >= 0.05
                                     else None)
    t = [r[2] for r in packets]
    gaps = [b - a for a, b in zip(t, t[1:])]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    tails = {k: sum(g > k * mean for g in gaps) / len(gaps) for k in (0.5, 1, 2, 3)}
    print(f"poisson: {len(t)} packets, {1 / mean:.1f} packets/s, interarrival CV {cv:.3f}, "
          f"P(gap > k mean) {tails} against exp(-k); {late:.3%} of packets sent > 0.5 ms late")
    assert len(t) >= 2000
    assert abs(1 / mean / 1000 - 1) < 0.03
    assert late < 0.05, f"{late:.1%} of packets sent more than 0.5 ms late: the machine too busy to judge a law"
    assert all(abs(p - math.exp(-k)) < 0.03 + 2 * late for k, p in tails.items()), (tails, late)
    assert 0.9 < cv < 1.3        # a CBR's is 0, a uniform gap's 0.58
    entry = _rep(ccrig)["poisson"][0]
    assert entry["receiver_packets"] == len(t) and entry["sender_vs_receiver"] == 0 and entry["loss"] == 0
    assert abs(entry["interarrival_s"]["cv"] - cv) < 1e-9
    # one clock on netns: the one-way delay is the path's, well under a millisecond on an idle 100 Mbit/s link
    assert 0 < entry["one_way_delay_s"]["p50"] < 1e-3
    # the interval rows are the receiver's: goodput is the delivered payload
    assert abs(ccrig.summary()["points"][0]["flows"][0]["goodput_bps"]["mean"] / (1000 * 100 * 8) - 1) < 0.1
    # and the source's own numbers go to Prometheus as the summary has them (the sample log is what is served)
    log = [json.loads(x) for x in (ccrig.run_dirs()[-1] / "samples.jsonl").read_text().splitlines()]
    delay = {s["labels"]["stat"]: s["value"] for s in log if s["name"] == "source_one_way_delay_seconds"}
    assert delay and delay["p50"] == entry["one_way_delay_s"]["p50"], delay
    assert [s["value"] for s in log if s["name"] == "source_jitter_seconds"] == [entry["jitter_s"]]


def test_the_runs_seed_replays_the_sources_random_times(ccrig):
    # the spec's seed reaches each source (schedule.flow_seed -> sources.py --seed): two runs with seed 5 send at
    # the same times from the first packet, a run with seed 6 does not. Read at the receiver (each packet's
    # send stamp), not from the argv: 200 Poisson packets/s for 3 s; the k-th of two independent such
    # processes lie ~5 ms * sqrt(2k) apart, the same seed's by the timers' lateness (well under a millisecond idle)
    def sent(seed: int) -> list[float]:
        spec = dumbbell([{"workload": {"kind": "poisson", "rate": "200pps", "size": "100b"}}], duration="3s",
                        seed=seed)
        before = set(ccrig.run_dirs())
        p = ccrig.run(spec)
        assert p.returncode == 0, p.stderr
        (run,) = set(ccrig.run_dirs()) - before
        log = (run / "points/000/rep0/receiver-0.jsonl").read_text().splitlines()
        t = sorted(r[1] for line in log for r in json.loads(line)["p"])
        return [x - t[0] for x in t]

    five, again, six = sent(5), sent(5), sent(6)
    apart = {k: 1e3 * statistics.median(abs(x - y) for x, y in zip(five, b)) for k, b in (("5", again), ("6", six))}
    print(f"send times: {len(five)}, {len(again)}, {len(six)} packets; median apart (ms): {apart}")
    assert len(five) >= 300 and len(six) >= 300
    assert apart["5"] < 5 and apart["6"] > 20, apart


def test_onoff_periods_and_flood_at_the_access_rate(ccrig):
    spec = dumbbell([{"workload": {"kind": "onoff", "rate": "1000pps", "size": "200b", "on": "1s", "off": "1s"}},
                     {"workload": {"kind": "flood"}}], duration="8s", rate="100mbit",
                    topology={"name": "dumbbell", "access": {"rate": "20mbit"},
                              "bottleneck": {"rate": "100mbit", "buffer": "100pkt", "qdisc": "pfifo"}})

    def attempt():
        p = ccrig.run(spec)
        assert p.returncode == 0, p.stderr
        # onoff: runs of packets at the receiver, split at gaps longer than half a period
        t = [r[2] for r in _packets(ccrig, 0)]
        runs, start = [], t[0]
        for a, b in zip(t, t[1:]):
            if b - a > 0.5:
                runs.append((start, a))
                start = b
        runs.append((start, t[-1]))
        on = [b - a for a, b in runs[:-1]]           # the last may be cut by the end of the run
        off = [c - b for (_, b), (c, _) in zip(runs, runs[1:])]
        # flood: what its receiver got, in wire bits, against the 20 Mbit/s access link
        got = _packets(ccrig, 1)
        return on, off, got, 8 * (len(got) - 1) * (1472 + 42) / (got[-1][2] - got[0][2])

    def busy(result):
        # a flood short of the access rate, or a period off by 5 %, while the run itself saw the machine starved
        # (CI: 17.7 of 20 Mbit/s under steal) is measured again
        on, off, _, wire = result
        fid = _rep(ccrig)["fidelity"]
        missed = wire < 0.9 * 20e6 or any(abs(x - 1) >= 0.05 for x in on + off)
        starved = machine_limited(fid) or (fid.get("cpu_steal") or 0) >= STEAL
        return f"steal {fid.get('cpu_steal') or 0:.0%}, {fid['verdict']}" if missed and starved else None

    on, off, got, wire = again_while_busy(attempt, busy)
    print(f"onoff: on {[round(x, 4) for x in on]} s, off {[round(x, 4) for x in off]} s")
    assert len(on) >= 3 and len(off) >= 3
    assert all(abs(x - 1) < 0.05 for x in on + off)
    assert _rep(ccrig)["onoff"][0]["periods"]["on_s"][:len(on)] == on
    entry = _rep(ccrig)["flood"][0]
    print(f"flood: {len(got)} packets, {wire / 1e6:.2f} Mbit/s on the wire, sender sent {entry['sender_packets']}")
    assert wire >= 0.9 * 20e6
    assert wire <= 1.02 * 20e6
    assert entry["receiver_packets"] == len(got) and abs(entry["delivered_wire_bps"] - wire) < 1


def _latency_p50(ccrig, flow: int, window=(0.0, 1e9)) -> float:
    """The median latency of the messages sent within window (seconds after the first)."""
    got = _packets(ccrig, flow)
    t0 = min(r[1] for r in got)
    return statistics.median(r[2] - r[1] for r in got if window[0] <= r[1] - t0 < window[1])


def test_interactive_latency_idle_and_behind_a_full_drop_tail_queue(ccrig):
    idle = ccrig.run(dumbbell([{"workload": {"kind": "interactive", "think": "20ms"}}], duration="5s"))
    assert idle.returncode == 0, idle.stderr
    p50_idle = _latency_p50(ccrig, 0)
    entry = _rep(ccrig)["interactive"][0]
    assert entry["receiver_messages"] == entry["sender_messages"] > 100
    assert abs(entry["latency_s"]["p50"] - p50_idle) < 1e-9
    one_tx = (40 + 66) * 8 / 10e6       # a 40-byte message in one frame at 10 Mbit/s
    assert p50_idle < 2e-3 + one_tx

    # behind a bulk flow that keeps the 100-packet drop-tail queue full: its delay is added to every message
    # (from 2 s on, once the bulk flow's slow start has filled it, until it ends at 8 s)
    busy = ccrig.run(dumbbell([{"cc": "cubic"}, {"workload": {"kind": "interactive", "think": "20ms"}}],
                              duration="8s"))
    assert busy.returncode == 0, busy.stderr
    p50_busy = _latency_p50(ccrig, 1, (2.0, 7.5))
    queue = 100 * 1514 * 8 / 10e6       # 121 ms
    print(f"interactive: p50 idle {p50_idle * 1e3:.3f} ms, behind a bulk flow {p50_busy * 1e3:.1f} ms "
          f"(a full queue: {queue * 1e3:.1f} ms)")
    # cubic keeps the queue between 0.7 and 1 of full after its first loss
    assert 0.6 * queue < p50_busy - p50_idle < 1.1 * queue


def test_bad_sources_are_refused_before_anything_is_set_up(ccrig):
    for workload, field in (({"kind": "poisson", "rate": "-5mbit"}, "flows[0].workload.rate"),
                            ({"kind": "onoff", "rate": "5mbit"}, "flows[0].workload.on"),
                            ({"kind": "onoff", "rate": "5mbit", "on": "1s", "off": "0s"}, "flows[0].workload.off"),
                            ({"kind": "cbr"}, "flows[0].workload.rate")):
        p = ccrig.run(dumbbell([{"workload": workload}]))
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and field in p.stderr, p.stderr
        assert leftovers(p.pid) == [] and ccrig.run_dirs() == []


def test_gilbert_elliott_loss_on_the_topology_comes_in_bursts(ccrig):
    # p = 0.02 good -> bad, r = 0.25 bad -> good, every packet lost while bad: a mean loss of 0.02 / 0.27 = 7.4 %
    # in bursts of mean length 1 / r = 4, at the receiver's own count (its log's sequence numbers)
    spec = dumbbell([{"workload": {"kind": "cbr", "rate": "2000pps", "size": "200b"}}], duration="8s",
                    rate="100mbit", topology={"name": "dumbbell", "loss": {"gilbert": {"p": 0.02, "r": 0.25}},
                                              "bottleneck": {"rate": "100mbit", "buffer": "100pkt",
                                                             "qdisc": "pfifo"}})
    p = ccrig.run(spec)
    assert p.returncode == 0, p.stderr
    seqs = sorted(int(r[0]) for r in _packets(ccrig, 0))
    lost = [b - a - 1 for a, b in zip(seqs, seqs[1:]) if b - a > 1]
    sent = seqs[-1] - seqs[0] + 1
    ratio, burst = sum(lost) / sent, statistics.fmean(lost)
    print(f"gilbert: {sent} packets, loss {ratio:.4f}, {len(lost)} bursts of mean length {burst:.2f}")
    assert sent > 10000 and 0.05 < ratio < 0.10 and 3.0 < burst < 5.2
    # the program counted every drop: the receiver's gaps are its drops on that link
    rep = _rep(ccrig)
    assert rep["links"]["r2->d1"]["dropped"] >= sum(lost)
    env = json.loads((ccrig.run_dirs()[-1] / "env.json").read_text())
    assert env["links"]["0"]["loss"]["r2->d1"]["loss"]["mean"] == pytest.approx(0.02 / 0.27)


def test_onoff_phases_are_judged_apart(ccrig):
    # 3 s on, 3 s off at 40 % of the line beside a bulk flow: the intervals the source was on throughout, and off
    # throughout, by its own schedule (summary.by_phase); the one holding each switch, and the one after it (the
    # source's packets still queued), count in neither
    spec = dumbbell([{"workload": {"kind": "onoff", "rate": "500pps", "size": "972b", "on": "3s", "off": "3s"}},
                     {"cc": "reno"}], duration="16s", rate="10mbit")
    p = ccrig.run(spec)
    assert p.returncode == 0, p.stderr
    phases = _rep(ccrig)["phases"]
    on, off = phases["on"], phases["off"]
    assert len(on["intervals"]) >= 2 and len(off["intervals"]) >= 2 and not set(on["intervals"]) & set(off["intervals"])
    rate = 500 * 972 * 8
    assert on["flows"][0]["goodput_bps"]["mean"] == pytest.approx(rate, rel=0.1)
    assert off["flows"][0]["goodput_bps"]["mean"] < 0.01 * rate
    # the bulk flow takes what the source leaves
    assert off["flows"][1]["goodput_bps"]["mean"] > on["flows"][1]["goodput_bps"]["mean"] + 0.5 * rate
