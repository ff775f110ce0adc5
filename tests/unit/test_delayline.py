"""The delay line's plan, room and figures (topologies/delayline), and the fidelity verdict on the delay a run had."""
from types import SimpleNamespace

import pytest

from ccrig.errors import InputError
from ccrig.experiments.run import fidelity
from ccrig.experiments.spec import validate
from ccrig.topologies import delayline, testbed
from ccrig.topologies.testbeds import available


def spec(topology: dict, **extra):
    return validate({"name": "d", "flows": [{"cc": "cubic", "count": 2}], "duration": "10s",
                     "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt"},
                                  **topology}, **extra}, "s.yaml")


def test_every_delayed_link_gets_a_line_and_loses_its_netem_delay():
    topo = spec({"rtt": "40ms", "per_pair": [{}, {"rtt": "0s"}]}).topology.build(2)
    built, lines = delayline.plan(topo, True)
    # pair 1: s1 - r1 (ACKs delayed r1 -> s1) and r2 - d1 (data delayed r2 -> d1); pair 2 has no delay at all
    assert [(l.a, l.b, l.a_to_b, l.b_to_a) for l in lines] == [("s1", "r1", 0.0, 0.02), ("r2", "d1", 0.02, 0.0)]
    assert [(x, y) for l in lines for x, y, _ in l.directions()] == [("r1", "s1"), ("r2", "d1")]
    assert not delayline.has_delay(built) and delayline.has_delay(topo)
    assert [l.a_to_b.rate for l in built.links] == [l.a_to_b.rate for l in topo.links]   # nothing else changed
    assert delayline.plan(topo, False) == (topo, [])


def test_room_refuses_a_bandwidth_delay_product_beyond_the_line_naming_the_field():
    spec({"rtt": "100ms", "bottleneck": {"rate": "1gbit", "buffer": "100pkt"}})   # fits: 4.1k of 699k packets
    with pytest.raises(InputError, match=r"topology\.rtt: got '20s'; expected an RTT of at most 15\.4s at 1000 Mbit/s"):
        spec({"rtt": "20s", "bottleneck": {"rate": "1gbit", "buffer": "100pkt"}})
    with pytest.raises(InputError, match=r"topology\.per_pair\[1\]\.rtt"):
        spec({"bottleneck": {"rate": "1gbit", "buffer": "100pkt"}, "per_pair": [{}, {"rtt": "30s"}]})


def test_via_names_what_it_accepts():
    assert spec({"rtt": "10ms"}, delay={"via": "line"}).delay.via == "line"
    with pytest.raises(InputError, match=r"delay\.via"):
        spec({"rtt": "10ms"}, delay={"via": "tunnel"})


@pytest.mark.skipif("mininet" not in available(), reason="Mininet is not installed here")
def test_a_testbed_without_lines_refuses_via_line():
    with pytest.raises(InputError, match=r"delay\.via: got 'line' on testbed 'mininet'"):
        spec({"rtt": "10ms"}, delay={"via": "line"}, testbed="mininet")


def test_lateness_quantiles_from_the_histogram():
    stats = {"late_us": {"10": 49, "40": 50, "900": 1}, "late_over": 0, "early": 0, "late_over_us": 20000}
    assert delayline.late_quantile(stats, 0.5) == pytest.approx(40.5e-6)
    assert delayline.late_quantile(stats, 0.0) == pytest.approx(10.5e-6)
    assert delayline.late_quantile(stats, 1.0) == pytest.approx(900.5e-6)
    assert delayline.late_quantile({"late_us": {}, "late_over": 3, "late_over_us": 20000}, 0.5) == 0.02
    assert delayline.late_quantile({"late_us": {}}, 0.5) is None
    s = delayline.summarise({"packets": 4, "hold_sum_ns": 4_000_000, "socket_drops": 1, "late_us": {"3": 4}})
    assert s["hold_mean_s"] == pytest.approx(1e-3) and s["lost"] == 1 and s["late_p50_s"] == pytest.approx(3.5e-6)


def judge(min_rtts: list[float], lines: dict, starts=(0.0, 0.0), one_path=False, resent=(), mins=None,
          echo=None) -> dict:
    exp = spec({"rtt": "100ms"})
    topo = exp.topology.build(2)
    flows = [SimpleNamespace(index=i, sender="s1" if one_path else f"s{i + 1}",
                             receiver="d1" if one_path else f"d{i + 1}", start=starts[i],
                             workload=SimpleNamespace(tcp_info=True)) for i in range(2)]
    entry = {"flows": [{"flow": i, "min_rtt_s": {"mean": m}, "handshake_retransmitted": i in resent}
                       for i, m in enumerate(min_rtts)]}
    fid = {"verdict": "ok", "reasons": []}
    fidelity.judge_delay(fid, entry, topo, flows, lines, mins or {i: [m] for i, m in enumerate(min_rtts)}, echo)
    return fid


def test_fidelity_holds_each_flows_min_rtt_to_the_configured_rtt():
    # 10 Mbit/s: one full packet takes 1.22 ms, so 100 ms may read 99.8 .. 101.42 ms
    assert judge([0.10005, 0.1013], {})["verdict"] == "ok"
    short = judge([0.0995, 0.1001], {})
    assert short["verdict"] == "testbed-limited" and "flow 0: min RTT 99.500 ms" in short["reasons"][0]
    long = judge([0.1001, 0.103], {})
    assert long["verdict"] == "testbed-limited" and "path s2->d2: its flows' least min RTT 103.000" in long["reasons"][0]
    assert judge([0.1001, 0.103], {}, starts=(0.0, 2.0))["verdict"] == "ok"   # a late starter may meet a queue
    assert judge([0.1001, 0.103], {}, resent=(1,))["verdict"] == "ok"   # no handshake sample: data met a queue
    # a SYN behind the other flows' initial windows: the path's least min RTT is what the line added
    assert judge([0.1001, 0.103], {}, one_path=True)["verdict"] == "ok"
    assert judge([0.1031, 0.103], {}, one_path=True)["verdict"] == "testbed-limited"
    assert judge([0.0995, 0.1001], {}, one_path=True)["verdict"] == "testbed-limited"   # each flow: the floor
    assert judge([0.1001, 0.1001], {})["delay"]["flows"][0]["configured_rtt_s"] == pytest.approx(0.1)


def test_the_echo_before_the_flows_measures_a_path_every_flow_of_which_met_a_queue():
    # study 002 in a TCG guest: six senders connected over 1.3 s while a window doubling each RTT filled the
    # queue, so every handshake met it; the echo round before any flow saw each path empty
    behind = judge([0.1001, 0.1470], {}, echo={("s1", "d1"): 0.10042, ("s2", "d2"): 0.10051})
    assert behind["verdict"] == "ok", behind
    assert behind["delay"]["paths"]["s2->d2"] == {"configured_rtt_s": 0.1, "high_s": pytest.approx(0.1014112),
                                                   "least_min_rtt_s": 0.147, "flow": 1, "echo_rtt_s": 0.10051,
                                                   "ok": True}
    # a line that adds too much delays the echo too; one that adds too little fails on the echo alone
    slow = judge([0.1001, 0.1470], {}, echo={("s1", "d1"): 0.10042, ("s2", "d2"): 0.1032})
    assert slow["verdict"] == "testbed-limited"
    assert "path s2->d2: its flows' least min RTT 147.000 ms (flow 1) and its echo before the flows 103.200 ms" \
        in slow["reasons"][0]
    short = judge([0.1001, 0.1003], {}, echo={("s2", "d2"): 0.0990})
    assert short["verdict"] == "testbed-limited" and "path s2->d2: its echo before the flows came back in 99.000" \
        in short["reasons"][0]
    # no reply (random loss took it): the flows alone, as before; a path no flow measured: the echo alone
    assert judge([0.1001, 0.1470], {}, echo={("s2", "d2"): None})["verdict"] == "testbed-limited"
    late = judge([0.1001, 0.1470], {}, starts=(0.0, 2.0), echo={("s2", "d2"): 0.1040})
    assert "path s2->d2: its echo before the flows 104.000 ms against" in late["reasons"][0]
    assert testbed.echo_rtt("1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
                            "rtt min/avg/max/mdev = 100.412/100.412/100.412/0.000 ms\n") == pytest.approx(0.100412)
    assert testbed.echo_rtt(b"round-trip min/avg/max = 20.5/20.5/20.5 ms") == pytest.approx(0.0205)
    # three echoes: their least (one reply late by a wake-up says nothing of the path)
    assert testbed.echo_rtt("3 packets transmitted, 3 received, 0% packet loss, time 401ms\n"
                            "rtt min/avg/max/mdev = 100.951/118.020/153.986/25.000 ms\n") == pytest.approx(0.100951)
    assert testbed.echo_rtt("1 packets transmitted, 0 received, 100% packet loss, time 0ms") is None


def test_a_min_rtt_from_a_timestamp_echo_is_no_measure_of_the_path():
    # whole milliseconds: the kernel's sample from a TCP timestamp echo (an ACK of resent data), which reads up
    # to a millisecond and a pacing interval short; noted, neither bound judged on it
    echo = judge([0.099, 0.1001], {})
    assert echo["verdict"] == "ok", echo
    assert echo["delay"]["flows"][0] == {"flow": 0, "configured_rtt_s": 0.1, "min_rtt_s": 0.099, "ok": True,
                                         "bounds_s": [pytest.approx(0.0998), None], "timestamp_echo_s": 0.099}
    # one entering mid-run (TCP's filter only falls): the intervals before it hold the microsecond sample, which
    # is the flow's measure (run J: 99.400 ms on average); a microsecond one short of the floor still fails
    mixed = judge([0.0994, 0.1001], {}, mins={0: [0.10003, 0.10003, 0.099, 0.099], 1: [0.1001]})
    assert mixed["verdict"] == "ok" and mixed["delay"]["flows"][0]["min_rtt_s"] == 0.10003, mixed
    assert mixed["delay"]["flows"][0]["timestamp_echo_s"] == 0.099
    short = judge([0.0994, 0.1001], {}, mins={0: [0.0997, 0.099], 1: [0.1001]})
    assert "flow 0: min RTT 99.700 ms" in short["reasons"][0]
    # ... nor for the path's upper bound: the other flow's own sample on one path still has to be near the RTT
    assert judge([0.099, 0.103], {}, one_path=True)["verdict"] == "testbed-limited"
    # a microsecond sample 0.2 ms short is still a short path, and a whole millisecond at or above the floor is
    # judged as any sample
    assert judge([0.0997, 0.1001], {})["verdict"] == "testbed-limited"
    assert judge([0.1, 0.104], {})["verdict"] == "testbed-limited"
    assert fidelity.timestamp_echo(0.1) and fidelity.timestamp_echo(0.493)
    assert not fidelity.timestamp_echo(0.0999995) and not fidelity.timestamp_echo(0.100015)


def test_fidelity_holds_each_line_to_its_delay():
    good = {"late_p50_s": 30e-6, "early": 0, "lost": 0}
    assert judge([0.1001, 0.1001], {"r2->d1": good})["verdict"] == "ok"
    late = judge([0.1001, 0.1001], {"r2->d1": {**good, "late_p50_s": 0.5e-3}})
    assert "delay line r2->d1: its frames left 0.500 ms late" in late["reasons"][0]
    assert judge([0.1001, 0.1001], {"r2->d1": {**good, "late_p99_s": 1.5e-3}})["verdict"] == "ok"
    tail = judge([0.1001, 0.1001], {"r2->d1": {**good, "late_p99_s": 0.02}})
    assert "left 20.000 ms late or more (p99)" in tail["reasons"][0]
    assert judge([0.1001, 0.1001], {"r2->d1": {**good, "lost": 2}})["verdict"] == "testbed-limited"
    assert judge([0.1001, 0.1001], {"r2->d1": {"error": "no counters"}})["verdict"] == "testbed-limited"


def test_a_lines_ring_is_twice_its_bandwidth_delay_product_within_the_room():
    topo = spec({"rtt": "100ms", "bottleneck": {"rate": "1gbit", "buffer": "100pkt"}}).topology.build(1)
    assert delayline.slots_for(0.05, topo) == int(2 * 0.05 * 1e9 / (8 * 1514) + 1024)   # 9280
    assert delayline.slots_for(0.001, topo) == 4096
    assert delayline.slots_for(30.0, topo) == delayline.room_packets(1500)


def test_tcp_buffer_raises_autotunings_ceiling_on_sender_and_receiver():
    from ccrig.experiments.run.sender_tcp import SenderTcp
    exp = validate({"name": "b", "duration": "10s", "flows": [{"cc": "cubic", "tcp": {"buffer": "64mb"}}],
                    "topology": {"name": "dumbbell", "bottleneck": {"rate": "1gbit", "buffer": "100pkt"}}}, "s.yaml")
    plan = SenderTcp(None, [(0, exp.flows[0], "s1", "d1")])
    assert plan.sysctls == {"s1": {"net.ipv4.tcp_rmem": "4096 131072 64000000",
                                   "net.ipv4.tcp_wmem": "4096 16384 64000000"},
                            "d1": {"net.ipv4.tcp_rmem": "4096 131072 64000000"}}


def test_preflight_takes_via_as_given_and_a_lined_topology_needs_no_netem():
    from ccrig.experiments.run.preflight import delay_via, qdisc_kinds
    exp = spec({"rtt": "20ms"}, delay={"via": "line"})
    assert delay_via(exp, None, "x") == ("line", "the spec asks for it (delay.via: line)")
    topo = exp.topology.build(exp.n_flows)
    assert "netem" in qdisc_kinds(topo)["r2"]
    assert all("netem" not in kinds for kinds in qdisc_kinds(delayline.plan(topo, True)[0]).values())
