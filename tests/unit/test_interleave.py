"""schedule.interleave: a study's specs in one queue keep each spec's own order, lose no pair, depend only on the
seed, and mix the specs through the whole queue (not one spec's pairs after another's)."""
from collections import Counter

from ccrig.experiments.run import schedule


def orders():
    return {"a": schedule.order({0: 3, 1: 3}, 1), "b": schedule.order({0: 6}, 2), "c": [(0, 0)]}


def test_each_spec_keeps_its_order_and_every_pair_once():
    got = schedule.interleave(orders(), 7)
    for spec, own in orders().items():
        assert [p[1:] for p in got if p[0] == spec] == own
    assert len(got) == sum(len(v) for v in orders().values()) == len(set(got))


def test_the_seed_decides_and_an_empty_spec_is_no_trouble():
    assert schedule.interleave(orders(), 7) == schedule.interleave(orders(), 7)
    assert schedule.interleave(orders(), 7) != schedule.interleave(orders(), 8)
    assert schedule.interleave({"a": [], "b": [(0, 0)]}, 1) == [("b", 0, 0)]


def test_the_specs_are_mixed_along_the_queue():
    # two specs of 20 pairs: over many seeds, each half of the queue holds each spec about equally often (one
    # after another would put every 'a' in one half)
    firsts = Counter()
    for seed in range(200):
        q = schedule.interleave({"a": [(0, r) for r in range(20)], "b": [(0, r) for r in range(20)]}, seed)
        firsts.update(p[0] for p in q[:20])
    assert abs(firsts["a"] - firsts["b"]) < 0.1 * (firsts["a"] + firsts["b"])
    # and no seed of these leaves a half to one spec alone
    assert all({p[0] for p in schedule.interleave({"a": [(0, r) for r in range(20)],
                                                   "b": [(0, r) for r in range(20)]}, s)[:20]} == {"a", "b"}
               for s in range(50))


def test_specs_needing_two_parameterisations_of_one_module_never_share_a_queue():
    from types import SimpleNamespace as NS

    from ccrig.experiments.run.together import law_groups

    def spec(*ccs):   # a run's points as law_groups reads them: each point's flows' cc values
        flows = [NS(cc=cc) for cc in ccs]
        return NS(points=[NS(experiment=NS(flow_list=lambda: flows))])
    mimd = {"law": "poly", "k": 2, "l": 1, "terms": 1, "alpha": 0.3, "beta": 0.1}
    other = {"law": "poly", "k": 2, "l": 1, "terms": 1, "alpha": 0.5, "beta": 0.1}
    runners = {"presets": spec("ab_smooth", "ab_standard", "cubic"), "mimd": spec(mimd, "reno"),
               "mimd_too": spec(mimd), "other": spec(other), "builtin": spec("reno")}
    groups = [sorted(g) for g in law_groups(runners)]
    # the module's tunable instance can hold mimd or other, not both at once; presets and builtins go anywhere
    assert groups == [["builtin", "mimd", "mimd_too", "presets"], ["other"]]
