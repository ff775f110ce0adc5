"""The tandem's shape (hops, pairs in order, who crosses which hop, the per-pair delays), its max-min fair shares
over the hops by hand, its Mininet Topo, and the inputs it refuses."""
import pytest

from ccrig.analysis.intervals import max_min, network_capacity
from ccrig.errors import InputError
from ccrig.experiments import spec as specmod
from ccrig.topologies import SPECS
from ccrig.topologies.named.tandem import TandemSpec
from ccrig.topologies.testbeds.mininet import Names, TopologyTopo, node_setup_argv

LINK = {"rate": "10mbit", "buffer": "50pkt"}
HOPS3 = [("r0", "r1"), ("r1", "r2"), ("r2", "r3")]


def _tandem(**kw):
    return TandemSpec.model_validate({"name": "tandem", "link": LINK, **kw}).build(1)


def _hops(topo, s, d):
    return [q for q in topo.path(s, d) if q in topo.queues()]


def test_registered_by_name():
    assert TandemSpec in SPECS
    exp = specmod.validate({"name": "x", "duration": "5s", "flows": [{"cc": "reno"}],
                            "topology": {"name": "tandem", "link": {**LINK, "qdisc": "pfifo"}}}, "s")
    assert isinstance(exp.topology, TandemSpec) and exp.topology.hops == 3


def test_pairs_come_through_first_then_each_hops_cross_ones_and_cross_their_hops():
    topo = _tandem(hops=3, pairs={"through": 2, "cross": 1})
    assert topo.pairs == [("t1", "t1d"), ("t2", "t2d"), ("c1_1", "c1_1d"), ("c2_1", "c2_1d"), ("c3_1", "c3_1d")]
    # every hop is a shaped queue of its own, the first the bottleneck
    assert topo.queues() == HOPS3 and topo.bottleneck == ("r0", "r1")
    for a, b in HOPS3:
        e = topo.egress_of(a, b).egress
        assert e.rate.bits_per_s == 10e6 and e.buffer.packets == 50 and e.qdisc.kind == "pfifo"
        assert topo.egress_of(b, a).egress.rate is None   # ACKs come back unshaped
    assert _hops(topo, "t1", "t1d") == HOPS3 and _hops(topo, "t2", "t2d") == HOPS3
    assert [_hops(topo, f"c{i}_1", f"c{i}_1d") for i in (1, 2, 3)] == [[h] for h in HOPS3]
    # and the ACKs back through no shaped hop
    assert all(not _hops(topo, d, s) for s, d in topo.pairs)
    # the address plan: the hops, then two access links per pair
    assert len(topo.links) == 3 + 2 * 5


def test_cross_groups_over_several_hops():
    topo = _tandem(hops=3, pairs={"through": 1, "cross": [{"first": 1, "last": 2, "count": 2},
                                                          {"first": 3, "last": 3}]})
    assert topo.pairs == [("t1", "t1d"), ("c1_1", "c1_1d"), ("c1_2", "c1_2d"), ("c2_1", "c2_1d")]
    assert _hops(topo, "c1_2", "c1_2d") == HOPS3[:2] and _hops(topo, "c2_1", "c2_1d") == HOPS3[2:]
    # group 1 enters before hop 1 (at r0) and leaves after hop 2 (at r2)
    assert topo.path("c1_1", "c1_1d") == [("c1_1", "r0"), ("r0", "r1"), ("r1", "r2"), ("r2", "c1_1d")]


def test_per_pair_delays_follow_the_pair_order_and_split_half_each_way():
    # scenario 8: source 1 at 12 s, source 2 at 24 s, the cross traffic at the topology's rtt
    topo = _tandem(pairs={"through": 2, "cross": 1}, rtt="4s",
                   per_pair=[{"rtt": "12s"}, {"rtt": "24s", "loss": 0.01, "rate": "20mbit"}])
    delay = {s: (topo.egress_of(topo.path(d, s)[-1][0], s).egress.delay,
                 topo.egress_of(topo.path(s, d)[-1][0], d).egress.delay) for s, d in topo.pairs}
    assert delay == {"t1": (6.0, 6.0), "t2": (12.0, 12.0), "c1_1": (2.0, 2.0), "c2_1": (2.0, 2.0),
                     "c3_1": (2.0, 2.0)}
    assert topo.egress_of("r3", "t2d").egress.loss == 0.01 and topo.egress_of("r3", "t1d").egress.loss == 0.0
    assert topo.egress_of("t2", "r0").egress.rate.bits_per_s == 20e6 and topo.egress_of("t1", "r0").egress.rate is None


def test_max_min_shares_of_the_built_tandem():
    # the runner's mechanism (experiments/run/runner.py _measure): each flow's shaped queues from Topology.path()
    topo = _tandem(hops=3, pairs={"through": 1, "cross": 1})
    cap = {q: 9.0 for q in topo.queues()}
    paths = [_hops(topo, s, d) for s, d in topo.pairs]
    # one through flow and one cross flow per hop: everyone gets half a hop
    assert max_min(paths, cap, [True] * 4) == pytest.approx([4.5] * 4)
    assert network_capacity(paths, cap) == pytest.approx(27)
    # cross traffic over hops 1-2 and a second group on hop 2: hop 2 is the through flow's bottleneck
    topo = _tandem(hops=3, pairs={"through": 1, "cross": [{"first": 1, "last": 2}, {"first": 2, "last": 2}]})
    paths = [_hops(topo, s, d) for s, d in topo.pairs]
    assert max_min(paths, {q: 9.0 for q in topo.queues()}, [True] * 3) == pytest.approx([3, 3, 3])


def test_mininet_builds_it_from_the_model():
    topology = _tandem(hops=3, pairs={"through": 1, "cross": 1}, rtt="10ms")
    topo = TopologyTopo(topology, names=Names("ccrig-78"), setup=False)
    assert len(topo.switches()) == len(topology.links) == 11
    assert sorted(topo.hosts()) == sorted(f"ccrig-78-{n.name}" for n in topology.nodes)
    for a, b in HOPS3:   # each hop's queue is our htb + pfifo on its router, not TCLink's
        dev = topology.egress_of(a, b).name
        argv = [" ".join(x) for x in node_setup_argv(topology, a)]
        assert f"tc qdisc add dev {dev} parent 1:1 handle 10: pfifo limit 50" in argv
        assert "sysctl -q -w net.ipv4.ip_forward=1" in argv
    # the delay rides on TCLink on the routers' egress toward the hosts
    delays = {(a.removeprefix("ccrig-78-"), info["intfName1"]): info["params1"].get("delay")
              for a, _, info in topo.links(withInfo=True)}
    assert delays[("r3", topology.egress_of("r3", "t1d").name)] == "5000us"
    assert delays[("r0", topology.egress_of("r0", "r1").name)] is None


def _spec(topology, flows=1):
    return {"name": "x", "testbed": "netns", "duration": "5s", "flows": [{"cc": "reno", "count": flows}],
            "topology": {"name": "tandem", "link": LINK, **topology}}


@pytest.mark.parametrize("topology, said", [
    ({"hops": 1}, r"topology.hops"),
    ({"pairs": {"through": 0, "cross": 0}}, r"topology.pairs: got 'no pairs'; expected at least one pair"),
    ({"link": {"rate": "10mbit"}}, r"topology.link.buffer: got None; expected a buffer such as 100pkt"),
    ({"link": {"rate": "0mbit", "buffer": "50pkt"}}, r"topology.link.rate"),
    ({"pairs": {"cross": [{"first": 2, "last": 4}]}},
     r"topology.pairs.cross\[0\]: got 'first 2, last 4'; expected hops first <= last <= 3"),
    ({"pairs": {"cross": [{"first": 3, "last": 2}]}}, r"topology.pairs.cross\[0\]: got 'first 3, last 2'"),
    ({"per_pair": [{}] * 5}, r"topology.per_pair: got '5 entries'; expected at most 4, one per host pair"),
    ({"per_pair": [{"rtt": "61s"}]}, r"topology.per_pair\[0\].rtt: got '61s'; expected at most 60s"),
    ({"pairs": {"through": 64, "cross": 64}, "hops": 16}, r"topology.pairs: got '1088 pairs over 16 hops'"),
])
def test_bad_tandems_are_one_line_naming_the_field(topology, said):
    with pytest.raises(InputError, match=said) as e:
        specmod.validate(_spec(topology), "spec.yaml")
    assert "\n" not in str(e.value)
