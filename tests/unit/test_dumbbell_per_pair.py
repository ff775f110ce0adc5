"""The dumbbell's `per_pair`: each entry gives one host pair its own access rate, RTT and loss, the rest keep the
topology-wide ones; the built Topology's links, egresses, pairs and paths, and the inputs it refuses."""
import pytest

from ccrig.errors import InputError
from ccrig.experiments import spec as specmod
from ccrig.topologies import loss
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.loss import GilbertElliott

BOTTLENECK = {"rate": "10mbit", "buffer": "50pkt"}


def _dumbbell(flows=3, **kw):
    return DumbbellSpec.model_validate({"name": "dumbbell", "bottleneck": BOTTLENECK, **kw}).build(flows)


def test_without_per_pair_every_pair_is_alike_and_as_before():
    topo = _dumbbell(rtt="20ms", loss=0.01, access={"rate": "100mbit"})
    assert topo.pairs == [("s1", "d1"), ("s2", "d2"), ("s3", "d3")]
    # the bottleneck, then two access links per pair, in pair order (the address plan is unchanged)
    assert [(l.a, l.b) for l in topo.links] == [("r1", "r2"), ("s1", "r1"), ("r2", "d1"), ("s2", "r1"),
                                                 ("r2", "d2"), ("s3", "r1"), ("r2", "d3")]
    for i in (1, 2, 3):
        data, ack = topo.egress_of("r2", f"d{i}").egress, topo.egress_of("r1", f"s{i}").egress
        assert (data.delay, ack.delay, data.loss, ack.loss) == (0.01, 0.01, 0.01, 0.0)
        assert data.rate.bits_per_s == ack.rate.bits_per_s == topo.egress_of(f"s{i}", "r1").egress.rate.bits_per_s \
            == 100e6


def test_each_entry_overrides_its_own_pair_only():
    topo = _dumbbell(rtt="20ms", loss=0.01, access={"rate": "100mbit"},
                     per_pair=[{"loss": {"gilbert": {"p": 0.02, "r": 0.25}}}, {"rtt": "60ms", "rate": "5mbit"}])
    # pair 1: its own error model on the receiver's link, the rest the topology's
    d1 = topo.egress_of("r2", "d1").egress
    assert d1.loss == GilbertElliott(p=0.02, r=0.25) and d1.delay == 0.01 and d1.rate.bits_per_s == 100e6
    assert topo.egress_of("r1", "s1").egress.loss == 0.0   # loss on the data path only
    # pair 2: its own RTT, split half toward each host, and its own access rate on all four egresses
    assert topo.egress_of("r2", "d2").egress.delay == topo.egress_of("r1", "s2").egress.delay == 0.03
    assert {topo.egress_of(a, b).egress.rate.bits_per_s for a, b in (("s2", "r1"), ("r1", "s2"), ("r2", "d2"),
                                                                     ("d2", "r2"))} == {5e6}
    assert topo.egress_of("r2", "d2").egress.loss == 0.01
    # pair 3 has no entry: the topology's
    d3 = topo.egress_of("r2", "d3").egress
    assert (d3.delay, d3.loss, d3.rate.bits_per_s) == (0.01, 0.01, 100e6)
    # the routes and the bottleneck do not change: every pair crosses r1 -> r2 and no other shaped queue
    for s, d in topo.pairs:
        assert topo.path(s, d) == [(s, "r1"), ("r1", "r2"), ("r2", d)]
    assert topo.queues() == [("r1", "r2")]


def test_an_override_of_zero_removes_the_topologys_delay_and_loss_for_that_pair():
    topo = _dumbbell(flows=2, rtt="20ms", loss={"rate": 0.05}, per_pair=[{}, {"rtt": "0s", "loss": 0}])
    assert topo.egress_of("r2", "d1").egress.loss == 0.05 and topo.egress_of("r2", "d1").egress.delay == 0.01
    d2 = topo.egress_of("r2", "d2").egress
    assert (d2.delay, d2.loss, d2.needs_netem) == (0.0, 0.0, False)


def test_a_pairs_loss_goes_to_the_bpf_program_where_there_is_no_netem():
    topo = _dumbbell(flows=2, per_pair=[{"loss": 0.02}])
    realised, points = loss.plan(topo, netem=False)
    assert [(p.node, p.peer, p.loss) for p in points] == [("r2", "d1", 0.02)]
    assert all(not e.needs_netem for lst in realised.interfaces().values() for e in (x.egress for x in lst))


def test_fixed_pairs_are_the_ones_per_pair_counts_against():
    topo = _dumbbell(flows=5, pairs=2, per_pair=[{"rtt": "10ms"}, {"rtt": "30ms"}])
    assert topo.pairs == [("s1", "d1"), ("s2", "d2")]
    assert [topo.egress_of("r2", d).egress.delay for d in ("d1", "d2")] == [0.005, 0.015]


def _spec(topology, flows=2):
    return {"name": "x", "testbed": "netns", "duration": "5s", "flows": [{"cc": "reno", "count": flows}],
            "topology": {"name": "dumbbell", "bottleneck": BOTTLENECK, **topology}}


@pytest.mark.parametrize("topology, said", [
    ({"pairs": 1, "per_pair": [{}, {"rtt": "5ms"}]},
     r"topology.per_pair: got '2 entries'; expected at most 1, one per host pair"),
    ({"per_pair": [{"rtt": "2min"}]}, r"topology.per_pair\[0\].rtt: got '120s'; expected at most 60s"),
    ({"per_pair": [{"rate": "0mbit"}]}, r"topology.per_pair\[0\].rate"),
    ({"per_pair": [{"loss": 1.5}]}, r"topology.per_pair\[0\].loss: got 1.5; expected a ratio from 0 to 1"),
    ({"per_pair": [{"delay": "5ms"}]}, r"topology.per_pair\[0\].delay: unknown field; expected one of: loss, rate, "
                                       r"rtt"),
    ({"per_pair": {"rtt": "5ms"}}, r"topology.per_pair"),
])
def test_bad_per_pair_is_one_line_naming_the_field(topology, said):
    with pytest.raises(InputError, match=said) as e:
        specmod.validate(_spec(topology), "spec.yaml")
    assert "\n" not in str(e.value)


def test_more_entries_than_flows_is_refused_naming_the_file():
    # one pair per flow: the flows are only known to the experiment, whose validation builds the topology once
    with pytest.raises(InputError, match=r"^spec.yaml: topology.per_pair: got '3 entries'; expected at most 2, one "
                                         r"per host pair the topology builds \(entry i is pair i\+1\)$"):
        specmod.validate(_spec({"per_pair": [{}, {}, {"rtt": "5ms"}]}), "spec.yaml")


def test_pair_order_rotate_moves_each_flow_to_the_next_pair_each_repetition():
    exp = specmod.validate({**_spec({"rtt": "20ms"}), "flows": [{"cc": "reno"}] * 3, "pair_order": "rotate"},
                           "spec.yaml")
    topo = exp.topology.build(exp.n_flows)
    assert exp.flow_pairs(topo, 0) == [("s1", "d1"), ("s2", "d2"), ("s3", "d3")]
    assert exp.flow_pairs(topo, 1) == [("s2", "d2"), ("s3", "d3"), ("s1", "d1")]
    # over as many repetitions as pairs every flow has sat on every pair once
    assert {exp.flow_pairs(topo, r)[0] for r in range(3)} == set(topo.pairs)
    assert exp.flow_pairs(topo, 3) == exp.flow_pairs(topo, 0)
    # fixed (the default): flow i on pair i modulo the pairs, whatever the repetition
    fixed = specmod.validate({**_spec({"pairs": 2}), "flows": [{"cc": "reno"}] * 3}, "spec.yaml")
    topo = fixed.topology.build(fixed.n_flows)
    assert fixed.flow_pairs(topo, 5) == [("s1", "d1"), ("s2", "d2"), ("s1", "d1")]
    # the repetition's flows are placed that way
    from ccrig.experiments.run.repetition import flows_of
    placed = flows_of(exp, exp.topology.build(3), {0: "reno", 1: "reno", 2: "reno"}, rep=2)
    assert [(f.sender, f.receiver) for f in placed] == [("s3", "d3"), ("s1", "d1"), ("s2", "d2")]


def test_a_bad_pair_order_is_one_line_naming_the_field():
    with pytest.raises(InputError, match=r"pair_order: got 'shuffle'; expected .*fixed.*rotate") as e:
        specmod.validate({**_spec({}), "pair_order": "shuffle"}, "spec.yaml")
    assert "\n" not in str(e.value)
