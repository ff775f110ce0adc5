"""The parking lot's shape (paths, pairs in order) and max-min fair shares over several bottlenecks, by hand."""
import pytest

from ccrig.analysis.intervals import fair_shares, max_min, network_capacity
from ccrig.topologies.named.parking_lot import ParkingLotSpec


def _lot(**kw):
    return ParkingLotSpec.model_validate({"name": "parking_lot", "link": {"rate": "10mbit", "buffer": "50pkt"},
                                          **kw}).build(1)


def test_pairs_come_long_first_then_each_hops_short_ones_and_cross_their_hops():
    topo = _lot(hops=3, pairs={"long": 2, "short": 1})
    assert topo.pairs == [("l1", "l1d"), ("l2", "l2d"), ("s1_1", "s1_1d"), ("s2_1", "s2_1d"), ("s3_1", "s3_1d")]
    hops = [("r0", "r1"), ("r1", "r2"), ("r2", "r3")]
    assert [q for q in topo.path("l1", "l1d") if q in hops] == hops
    assert [q for q in topo.path("s2_1", "s2_1d") if q in hops] == [("r1", "r2")]
    assert topo.queues() == hops and topo.bottleneck == ("r0", "r1")
    # and the ACKs come back the other way, through no shaped hop
    assert not [q for q in topo.path("l1d", "l1") if q in hops]


def test_max_min_over_a_parking_lot():
    hops = ["h1", "h2", "h3"]
    cap = {h: 9.0 for h in hops}
    # one long flow and one short per hop: everyone gets half a hop
    paths = [hops, ["h1"], ["h2"], ["h3"]]
    assert max_min(paths, cap, [True] * 4) == pytest.approx([4.5] * 4)
    # two shorts on hop 1: hop 1 is shared by three, the others' shorts take what the long flow leaves
    paths = [hops, ["h1"], ["h1"], ["h2"], ["h3"]]
    assert max_min(paths, cap, [True] * 5) == pytest.approx([3, 3, 3, 6, 6])
    # a flow that has stopped leaves its share: without hop 1's shorts the long flow gets half of hops 2 and 3
    assert max_min(paths, cap, [True, False, False, True, True]) == pytest.approx([4.5, None, None, 4.5, 4.5])
    # the most the network carries: every hop full with the long flow idle
    assert network_capacity([hops, ["h1"], ["h2"], ["h3"]], cap) == pytest.approx(27)
    assert network_capacity([hops], cap) == pytest.approx(9)


def test_one_bottleneck_is_still_an_equal_split_of_the_active_flows():
    spans = [(0, 10), (0, 5), (3, 10)]
    assert fair_shares(9.0, spans, 6, 7) == pytest.approx([4.5, None, 4.5])
    assert fair_shares(9.0, spans, 6, 7, [["b"], ["b"], ["b"]], {"b": 9.0}) == pytest.approx([4.5, None, 4.5])


@pytest.mark.parametrize("field, value, said", [("hops", 1, "hops"), ("pairs", {"long": 0, "short": 0}, "pairs"),
                                                ("link", {"rate": "0mbit", "buffer": "50pkt"}, "link.rate"),
                                                # a hop without a buffer would be neither measured nor shared out
                                                ("link", {"rate": "10mbit"}, "link.buffer: got None")])
def test_bad_parking_lots_are_named(field, value, said):
    from ccrig.experiments import spec as specmod
    from ccrig.errors import InputError
    raw = {"name": "x", "testbed": "netns", "duration": "5s", "flows": [{"cc": "reno"}],
           "topology": {"name": "parking_lot", "link": {"rate": "10mbit", "buffer": "50pkt"}, field: value}}
    with pytest.raises(InputError, match=said):
        specmod.validate(raw, "spec.yaml")


def test_network_capacity_without_the_program_is_the_programs_answer():
    """Where a link every flow crosses is the least of the links they cross, network_capacity answers without
    the linear program (scipy.optimize's import costs a TCG guest over a minute): the same as the program's."""
    import random
    from scipy.optimize import linprog
    rng = random.Random(3)
    shortcut = 0
    for _ in range(400):
        links = [f"h{i}" for i in range(rng.randint(1, 5))]
        cap = {l: float(rng.choice([0, 3, 5, 9, 9, 12])) for l in links}
        common = rng.sample(links, rng.randint(0, len(links)))
        paths = [sorted(set(common) | set(rng.sample(links, rng.randint(0 if common else 1, len(links)))))
                 for _ in range(rng.randint(1, 4))]
        a = [[1.0 if l in p else 0.0 for p in paths] for l in sorted(cap)]
        res = linprog([-1.0] * len(paths), A_ub=a, b_ub=[cap[l] for l in sorted(cap)], bounds=(0, None),
                      method="highs")
        assert network_capacity(paths, cap) == pytest.approx(-res.fun, abs=1e-9), (paths, cap)
        least = min(cap[l] for p in paths for l in p)
        shortcut += any(cap[l] == least for l in set(paths[0]).intersection(*paths[1:]))
    assert 50 < shortcut < 390   # both ways were taken
