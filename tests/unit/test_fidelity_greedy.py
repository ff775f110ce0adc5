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
