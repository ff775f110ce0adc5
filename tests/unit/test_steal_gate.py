"""experiments/run/steal.py: a pair spoiled under steal holds the engine; the gate probes until the machine is
quiet, the budget ends or (without one) MAX_WAIT_S pass; the waits leave the budget's pace. The probe itself runs
on the real machine in tests/host/test_steal_probe.py."""
import pytest

from ccrig.experiments.run import budget, engine, steal

LIMITED = {"verdict": "testbed-limited", "reasons": ["delay line d1: a hundredth of its frames left 4 ms late"]}


def record(steal_share: float, spoiled: bool = True) -> dict:
    fid = dict(LIMITED) if spoiled else {"verdict": "ok", "reasons": []}
    return {"fidelity": {**fid, "cpu_steal": steal_share}}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def gate(readings: list[tuple[float, float]], stop_at: float | None = None, bounded: bool = False):
    clock, said, it = Clock(), [], iter(readings)

    def probe():
        clock.now += steal.PROBE_S
        return next(it)
    g = steal.Gate(said.append, (lambda: stop_at is not None and clock.now >= stop_at), bounded, probe,
                   clock.sleep, clock)
    return g, clock, said


@pytest.mark.parametrize("rec,held", [
    (record(0.20), True),                 # spoiled, and the hypervisor took a fifth
    (record(0.04), False),                # spoiled, steal below what is worth naming: the machine's own
    (record(0.30, spoiled=False), False),  # steal, but the repetition stood: nothing to save
    (None, False),                        # the pair failed without a record
])
def test_only_a_pair_spoiled_under_steal_holds_the_gate(rec, held):
    g, _, _ = gate([])
    g.note(rec, "thresholds point 4 repetition 0")
    assert g.held is held
    if held:
        assert g.cause == "thresholds point 4 repetition 0 was spoiled while the hypervisor took 20%"


def test_the_wait_probes_until_quiet_and_records_every_probe():
    g, clock, said = gate([(0.25, 1.0), (0.12, 1.0), (0.01, 0.99)])
    g.note(record(0.25))
    g.wait()
    assert not g.held
    (w,) = g.waits
    assert [p["steal"] for p in w["probes"]] == [0.25, 0.12, 0.01] and w["ended"] == "quiet"
    # three probes and the two waits between them
    assert w["seconds"] == g.waited == pytest.approx(3 * steal.PROBE_S + 2 * steal.WAIT_S)
    assert said[-1].startswith("waited 69 s for steal to pass (3 probe(s), last 1%)")


def test_a_probe_that_left_a_core_idle_is_not_trusted():
    g, _, said = gate([(0.0, 0.5), (0.02, 0.95)])
    g.note(record(0.25))
    g.wait()
    assert len(g.waits[0]["probes"]) == 2
    assert any("least busy core only 50% busy" in s for s in said)


def test_the_budget_ends_a_wait():
    g, clock, _ = gate([(0.3, 1.0)] * 100, stop_at=200.0, bounded=True)
    g.note(record(0.3))
    g.wait()
    assert g.waits[0]["ended"] == "the budget ended"
    assert 200.0 <= clock.now < 200.0 + steal.PROBE_S + steal.WAIT_S


def test_without_a_budget_a_wait_ends_after_its_bound_and_the_run_goes_on():
    g, clock, _ = gate([(0.3, 1.0)] * 100)
    g.note(record(0.3))
    g.wait()
    assert g.waits[0]["ended"].startswith("steal stayed")
    assert steal.MAX_WAIT_S <= clock.now < steal.MAX_WAIT_S + steal.PROBE_S + steal.WAIT_S


def test_a_bounded_wait_outlasts_the_unbounded_bound():
    g, clock, _ = gate([(0.3, 1.0)] * 100, stop_at=2 * steal.MAX_WAIT_S, bounded=True)
    g.note(record(0.3))
    g.wait()
    assert clock.now >= 2 * steal.MAX_WAIT_S and g.waits[0]["ended"] == "the budget ended"


def test_one_at_a_time_waits_after_a_pair_spoiled_under_steal(monkeypatch):
    ran, events = [], []
    records = {(0, 0): record(0.0, spoiled=False), (0, 1): record(0.22), (0, 2): record(0.0, spoiled=False)}

    def run(unit, lent):
        ran.append(unit)
        events.append(("ran", unit))
        return records[unit]
    monkeypatch.setattr(engine.repetition, "run", run)
    g, _, _ = gate([(0.01, 1.0)])
    real_wait = g.wait

    def wait():
        events.append(("waited",))
        real_wait()
    g.wait = wait
    engine.one_at_a_time([(0, 0), (0, 1), (0, 2)], lambda pair: pair, lambda pair: None,
                         lambda pair, entry, error, beside: None, gate=g)
    assert events == [("ran", (0, 0)), ("ran", (0, 1)), ("waited",), ("ran", (0, 2))]


def test_the_budgets_pace_leaves_the_waits_out():
    looks = [{"spent_s": 100.0, "added": {"a#0": 10}, "waited_s": 0.0}]
    # the round took 700 s of which 400 waited for steal: 300 s for pairs planned at 300 s
    assert budget._pace(looks, 800.0, {"a": 30.0}, waited=400.0) == pytest.approx(1.0)
    assert budget._pace(looks, 800.0, {"a": 30.0}) == pytest.approx(7 / 3)
    assert budget.waited_s({"steal_waits": [{"seconds": 30.5}, {"seconds": 9.5}]}) == 40.0


def test_side_by_side_admits_nothing_while_the_gate_is_held():
    g, _, _ = gate([(0.01, 1.0)])
    q = engine._Queue([(0, 0), (0, 1), (0, 2)], lambda pair: 1.0, 10.0, g)
    assert q.next_fits([0, 1])
    q.running["pipe"] = [(0, 0), None, 0, 1.0, False, False, None]
    g.note(record(0.3))          # a pair came back spoiled under steal: the next waits, a slot free or not
    assert not q.next_fits([1])
    q.running.clear()
    assert not q.next_fits([0, 1])   # side_by_side waits on the gate now (nothing running)
    g.wait()
    assert q.next_fits([0, 1])
