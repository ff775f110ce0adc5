"""What a kernel fault spoils: the measured intervals its span touched, for every flow and the system; a repetition
with too little left goes whole (analysis/samples.py)."""
from types import SimpleNamespace

import pytest

from ccrig.analysis import samples
from ccrig.experiments.run import summary


def test_fault_exclusion_is_every_measured_interval_a_span_overlaps():
    faults = [{"flow": 3, "spans_s": [[2.19, 3.54]]}, {"flow": 1, "spans_s": [[0.2, 0.9], [9.5, 30.0]]}]
    ex = samples.fault_exclusion(faults, 1.0, 2, 10)
    # [0.2, 0.9] and the interval after it lie in the warm-up; [2.19, 3.54] touches intervals 2 and 3, and
    # disturbs 4; [9.5, 30] the last, 9
    assert samples.FAULT_AFTER == 1
    assert ex["intervals"] == [2, 3, 4, 9] and ex["measured"] == 8 and ex["left"] == 4 and ex["flows"] == [1, 3]
    assert samples.fault_exclusion([], 1.0, 2, 10) is None
    # a span ending exactly on a boundary touches one interval, and the next is the one after
    assert samples.fault_exclusion([{"flow": 0, "spans_s": [[4.5, 5.0]]}], 1.0, 0, 8)["intervals"] == [4, 5]
    # a fault in the warm-up's last interval disturbs the first measured one
    assert samples.fault_exclusion([{"flow": 0, "spans_s": [[1.2, 1.8]]}], 1.0, 2, 8)["intervals"] == [2]


def rep(**extra):
    return {"fidelity": {"verdict": "ok", "reasons": []}, "cross_check": [], **extra}


def test_a_fault_spoils_the_repetition_only_when_too_little_is_left():
    faults = [{"flow": 0, "spans_s": [[2.0, 4.5]]}]
    kept = rep(kernel_fault=faults, fault_exclusion=samples.fault_exclusion(faults, 1.0, 1, 11))
    assert kept["fault_exclusion"]["left"] == 6 and samples.spoiled(kept) is None
    assert samples.exclusions(kept) == [{"what": "intervals", "intervals": [2, 3, 4, 5], "flows_hit": [0],
                                         "reason": kept["fault_exclusion"]["reason"]}]
    wide = [{"flow": 0, "spans_s": [[1.0, 6.5]]}]
    gone = rep(kernel_fault=wide, fault_exclusion=samples.fault_exclusion(wide, 1.0, 1, 11))
    why = samples.spoiled(gone)
    assert why.startswith("kernel_fault:") and "leaving 3" in why and "50%" in why
    assert samples.spoiled_by(gone) == ("kernel_fault", why)   # the kind the engine reruns by (reruns.py)
    limited = rep(fidelity={"verdict": "testbed-limited", "reasons": ["cpu"]}, kernel_fault=wide)
    assert samples.spoiled_by(limited)[0] == "fidelity" and samples.spoiled_by(kept) is None
    assert [e["what"] for e in samples.exclusions(gone)] == ["intervals", "repetition"]
    # recorded before intervals were excluded: its means hold the fault's intervals, so it goes whole
    old = rep(kernel_fault=faults)
    assert "include the intervals it touched" in samples.spoiled(old)
    good, bad = samples.usable([kept, gone, old, rep()])
    assert [n for n, _ in good] == [0, 3] and [n for n, _ in bad] == [1, 2]


def test_a_repetitions_means_leave_the_fault_intervals_out():
    flow = SimpleNamespace(index=0, label="ab_standard", cc="ab_standard", sender="s1", receiver="d1", name="")
    rows = [{"goodput_bps": g, "active": True} for g in (1.0, 5.0, 5.0, 50.0, 5.0)]
    rows[3]["fault"] = True
    system = [dict(r) for r in rows]
    entry = summary.repetition([flow], {0: rows}, system, 1, 10.0, 10.0, [])
    assert entry["flows"][0]["goodput_bps"]["mean"] == pytest.approx(5.0)
    assert entry["system"]["goodput_bps"]["mean"] == pytest.approx(5.0)


def check(acked, own, flight):
    return {"flow": 3, "collector_bytes_acked": acked, "iperf3_bytes_received": own, "collector_in_flight_bytes": flight,
            "collector_vs_iperf3": acked / own - 1}


def test_the_collector_and_the_workload_may_differ_by_what_was_in_flight_from_its_end_on_no_more():
    # measured at 500 ms RTT, 10 Mbit/s, 30 flows: iperf3's server read 253400 bytes, the sender's last sample
    # (20 ms before the server's reset reached it) had 244750 acked: -3.4 %, with ~7 segments in flight
    assert samples.spoiled(rep(cross_check=[check(244750, 253400, 7 * 1448)])) is None
    # the collector lost the socket early (in flight then cannot cover the rest), or counted more than was read
    lost = samples.spoiled(rep(cross_check=[check(200000, 253400, 7 * 1448)]))
    assert lost.startswith("collector disagreement: flow 3's") and "-21.1 %" in lost and "10136 bytes" in lost
    assert samples.spoiled(rep(cross_check=[check(270000, 253400, 0)])).startswith("collector disagreement")
    # the collector ahead, by what was in flight from the workload's end on (study 001 run D, 100 Mbit/s, PER 0.1:
    # iperf3's server counted 311320 bytes; a retransmission 3 s after the end acked 9 segments at once, 324390)
    assert samples.spoiled(rep(cross_check=[check(324390, 311320, 9 * 1448)])) is None
    ahead = samples.spoiled(rep(cross_check=[check(324390, 311320, 2 * 1448)]))   # a margin of 2 segments: not enough
    assert "+4.2 %" in ahead and "2896 bytes in flight from the workload's end on" in ahead
    # an entry from before the in-flight bytes were recorded keeps the plain tolerance
    assert samples.spoiled(rep(cross_check=[{"flow": 0, "collector_vs_iperf3": -0.034}])) is not None


def test_a_handshake_retransmitted_is_seen_in_the_first_established_sample():
    syn_sent, est = {"state": 2, "total_retrans": 0}, {"state": 1, "total_retrans": 0}
    assert not summary.handshake_retransmitted([(0.0, syn_sent), (0.5, est), (3.0, {**est, "total_retrans": 4})])
    assert summary.handshake_retransmitted([(0.0, syn_sent), (1.5, {**est, "total_retrans": 1})])
    assert not summary.handshake_retransmitted([(0.0, syn_sent)])


def test_the_cross_check_takes_the_most_in_flight_from_the_workloads_end_on():
    from ccrig.experiments.workloads.base import Flow
    from ccrig.experiments.workloads.bulk import Bulk
    flow = Flow(Bulk(), 0, "reno", "reno", "s1", "d1", 0.0, 30.0)
    sent = [(t, {"bytes_acked": a, "unacked": u, "snd_mss": 1448, "cc": "reno"})
            for t, a, u in ((10.0, 100000, 40), (29.5, 290000, 13), (31.0, 300000, 9), (33.1, 313032, 4))]
    got = [(33.0, {"bytes_received": 313000})]
    sampler = SimpleNamespace(snapshot=lambda key: sent if key == flow.sender_key else got)
    (c,) = summary.cross_check([flow], {flow.sender_key: sampler, flow.receiver_key: sampler},
                               {0: {"end": {"sum_received": {"bytes": 300000}}}})
    assert c["collector_in_flight_bytes"] == 13 * 1448   # at 29.5 s, not the 40 of 10 s nor the last sample's 4
    assert c["collector_bytes_acked"] == 313032 and c["receiver_bytes_received"] == 313000
    assert samples.spoiled(rep(cross_check=[c])) is None   # +4.3 %, within 3 % once 13 segments are allowed


def test_repairs_add_up_over_a_runs_sessions():
    s: dict = {}
    summary.add_repairs(s, {})                       # no BPF law: nothing said
    assert "bpf_repaired" not in s
    summary.add_repairs(s, {"ab_smooth": 3, "ab_standard": 0})
    summary.add_repairs(s, {"ab_smooth": 2, "ab_responsive": 1})   # a resumed run's session, its variants new
    assert s["bpf_repaired"] == {"ab_smooth": 5, "ab_standard": 0, "ab_responsive": 1}
