"""Cumulative counters taken to the intervals' boundaries from readings at their own times (analysis/counters.py)."""
import pytest

from ccrig.analysis.counters import Counters


def test_a_count_is_linear_between_readings_and_held_past_the_ends():
    c = Counters([(0.0, {"n": 0}), (2.0, {"n": 10}), (3.0, {"n": 40})])
    assert c.at("n", -1) == 0 and c.at("n", 1.0) == 5 and c.at("n", 2.5) == 25 and c.at("n", 9) == 40
    assert c.between("n", 1.0, 2.5) == 20
    assert c.gap() == 2.0
    assert c.nearest(2.4) == {"n": 10} and c.nearest(2.6) == {"n": 40}
    assert Counters([]).at("n", 1.0) == 0.0


def test_a_loop_that_read_late_puts_no_count_where_it_did_not_happen():
    # 10 drops a second for 60 s, read as study 001's loop read them with twelve pairs side by side (2026-12-07):
    # 35 boundaries by the time the traffic ended (each later than the last), the other 25 at once after it
    times = [1.72 * k for k in range(1, 36)] + [62.0 + 0.05 * k for k in range(25)]
    readings = [(0.0, {"dropped": 0})] + [(t, {"dropped": 10 * min(t, 60.0)}) for t in times]
    as_read = [b[1]["dropped"] - a[1]["dropped"] for a, b in zip(readings, readings[1:])]
    assert as_read[30:].count(0) >= 25   # taken as read: the last half of the run dropped nothing
    c = Counters(readings)
    per_interval = [c.between("dropped", k - 1, k) for k in range(1, 61)]
    assert all(x == pytest.approx(10, rel=0.25) for x in per_interval[:59]), per_interval
    assert sum(per_interval[30:]) == pytest.approx(300, rel=0.05)   # the measured window's half holds its half
