"""experiments/fidelity.greedy: goodput below T_max points at the machine only when nothing but the queues could
hold the flows back."""
from types import SimpleNamespace

import pytest

from ccrig.experiments.run import fidelity
from ccrig.experiments.spec import validate


def judged(topology: dict, flows: list[dict] = ({"cc": "cubic", "count": 2},)) -> bool:
    exp = validate({"name": "g", "flows": list(flows), "duration": "10s", "topology": topology}, "s.yaml")
    running = [SimpleNamespace(workload=f.workload, start=f.start) for f in exp.flow_list()]
    return fidelity.greedy(exp.topology.build(exp.n_flows), running, exp.flows)


BOTTLENECK = {"rate": "10mbit", "buffer": "50pkt"}


def test_bulk_flows_behind_one_bottleneck_are_greedy():
    assert judged({"name": "dumbbell", "bottleneck": BOTTLENECK, "rtt": "20ms"})
    assert judged({"name": "parking_lot", "hops": 2, "link": BOTTLENECK, "pairs": {"long": 1, "short": 1}},
                  [{"cc": "reno", "count": 3}])


@pytest.mark.parametrize("topology,flows", [
    ({"loss": 0.01}, None),
    ({"access": {"rate": "5mbit"}}, None),
    ({"per_pair": [{"rate": "2mbit"}]}, None),
    ({"per_pair": [{}, {"loss": 0.02}]}, None),
    ({}, [{"cc": "cubic"}, {"cc": "cubic", "max_window": 5}]),
    ({}, [{"cc": "cubic"}, {"cc": "cubic", "stop": "5s"}]),
    ({}, [{"cc": "cubic"}, {"cc": "cubic", "start": "2s"}]),
    ({}, [{"cc": "cubic"}, {"workload": {"kind": "cbr", "rate": "1mbit"}}]),
])
def test_anything_else_that_holds_a_flow_back_makes_it_not_greedy(topology, flows):
    assert not judged({"name": "dumbbell", "bottleneck": BOTTLENECK, **topology},
                      flows or [{"cc": "cubic", "count": 2}])


def _verdict(backlogs: list[float], dequeue_share: float) -> dict:
    """A 10 Mbit/s bottleneck's repetition of 10 measured intervals: its backlog at each boundary, and what it
    dequeued of its rate in every interval (the goodput with it)."""
    m = fidelity.Monitor(10e6, 9.5e6, 0, [], greedy=False)
    m.rows = [{"queue_known": True, "goodput_bps": 9.5e6 * dequeue_share, "dequeue_bps": 10e6 * dequeue_share,
               "backlog_packets": b, "dropped": 0.0, "cpu_max": 0.1, "cpu": 0.1, "t_max_bps": 9.5e6,
               "rate_bps": 10e6} for b in backlogs]
    return m.verdict([], 0.02)


def test_a_queue_that_held_packets_through_the_intervals_but_sent_short_of_its_rate_starved():
    starved = _verdict([40.0] * 9 + [0.0], 0.85)
    assert starved["verdict"] == "testbed-limited" and "dequeued 0.85 of its configured rate" in starved["reasons"][0]


def test_a_queue_empty_at_half_the_boundaries_is_no_witness_of_a_starved_shaper():
    # study 001's smooth law at PER 0.01 alone on an idle machine: 0.86-0.88 of the rate, empty at 44-52 %
    v = _verdict([3.0, 0.0] * 5, 0.87)
    assert v["verdict"] == "ok" and v["reasons"] == [], v


def _greedy(backlogs: list[float], goodput_share: float, dropped: float) -> dict:
    """Greedy flows through a 2 Mbit/s bottleneck (167 packets a second), 10 measured intervals; dropped: the
    packets it dropped in each."""
    m = fidelity.Monitor(2e6, 1.9e6, 0, [], greedy=True)
    m.rows = [{"queue_known": True, "goodput_bps": 1.9e6 * goodput_share, "dequeue_bps": 2e6 * goodput_share,
               "backlog_packets": b, "dropped": dropped, "sent_packets": 167 * goodput_share, "cpu_max": 0.4,
               "cpu": 0.35, "t_max_bps": 1.9e6, "rate_bps": 2e6} for b in backlogs]
    return m.verdict([], 0.02)


def test_an_empty_queue_below_t_max_is_the_machine_unless_the_queue_dropped_what_held_the_flows():
    # senders slower than the link: nothing waited for it, and a burst now and then overflowed it
    slow = _greedy([0.0, 2.0] * 5, 0.8, 0.5)
    assert slow["verdict"] == "testbed-limited" and "the senders, not the link" in slow["reasons"][0], slow
    # study 002's RED at 10 packets: 23 % of the packets dropped, the queue empty at half the boundaries
    red = _greedy([0.0, 2.0] * 5, 0.8, 40.0)
    assert red["verdict"] == "ok" and red["reasons"] == [], red
    assert 0.2 < red["bottleneck_drop_share"] < 0.25 and slow["bottleneck_drop_share"] < fidelity.LOSS_HELD


def test_time_the_hypervisor_stole_is_named_beside_a_symptom_and_recorded_always(monkeypatch):
    # /proc/stat as a cloud VM's: 30 % of the measured intervals' CPU time went to another guest on the host
    readings = iter([{"cpu": (0, 0, 0, 0)}] * 2 + [{"cpu": (800, 1000, 50, 300)}])   # start, warm-up, end
    monkeypatch.setattr(fidelity, "cpu_times", lambda: next(readings))
    m = fidelity.Monitor(10e6, 9.5e6, 0, [], greedy=False)
    m.rows = [{"queue_known": True, "goodput_bps": 8e6, "dequeue_bps": 8.5e6, "backlog_packets": 40.0,
               "dropped": 0.0, "cpu_max": 0.8, "cpu": 0.8, "t_max_bps": 9.5e6, "rate_bps": 10e6}] * 10
    v = m.verdict([], 0.02)
    assert v["verdict"] == "testbed-limited" and v["cpu_steal"] == pytest.approx(0.3)
    assert "the hypervisor took 30% of this machine's CPU time (steal)" in v["reasons"][-1], v["reasons"]
    # the delay check's reasons come after the Monitor's: the steal is still said once
    fidelity.name_steal(v)
    assert sum("hypervisor" in r for r in v["reasons"]) == 1
    delayed = {"verdict": "testbed-limited", "reasons": ["delay line r1->s1: ... (p99)"], "cpu_steal": 0.25}
    fidelity.name_steal(delayed)
    assert delayed["reasons"][-1].startswith("the hypervisor took 25%")
    # steal alone is no verdict: a queue that kept its rate is the link's, whoever had the CPU
    readings = iter([{"cpu": (0, 0, 0, 0)}] * 2 + [{"cpu": (800, 1000, 50, 300)}])   # start, warm-up, end
    m = fidelity.Monitor(10e6, 9.5e6, 0, [], greedy=False)
    m.rows = [{"queue_known": True, "goodput_bps": 9.5e6, "dequeue_bps": 10e6, "backlog_packets": 40.0,
               "dropped": 0.0, "cpu_max": 0.8, "cpu": 0.8, "t_max_bps": 9.5e6, "rate_bps": 10e6}] * 10
    ok = m.verdict([], 0.02)
    assert ok["verdict"] == "ok" and ok["cpu_steal"] == pytest.approx(0.3) and ok["reasons"] == []
