"""T_max follows the link (analysis/capacity.py): capacities piecewise constant between the schedule's changes,
time-averaged over each interval; the fair shares the same way; a parking lot's max-min shares per piece."""
import pytest

from ccrig.analysis.capacity import Capacity

B = ("r1", "r2")


def test_constant_capacity_is_the_links_own():
    cap = Capacity({B: 10e6})
    assert not cap.varies
    assert cap.t_max(0, 1) == 10e6 and cap.t_max(5, 6) == 10e6
    assert cap.shares([(0, 10), (0, 10)], 2, 3) == [5e6, 5e6]


def test_a_halving_halves_t_max_for_the_intervals_it_covers_and_restores():
    cap = Capacity({B: 10e6}, [(3.0, B, 5e6), (6.0, B, None)])
    assert [cap.t_max(k, k + 1) for k in range(8)] == [10e6] * 3 + [5e6] * 3 + [10e6] * 2
    # an interval the change cuts in half is the time average of its two pieces
    assert cap.t_max(2.5, 3.5) == pytest.approx(7.5e6)
    assert cap.shares([(0, 10), (0, 10)], 3, 4) == [2.5e6, 2.5e6]
    assert cap.link(B, 2.5, 3.5) == pytest.approx(7.5e6) and cap.link(("r2", "d1"), 0, 1) is None


def test_a_down_link_leaves_nothing_and_an_inactive_flow_no_share():
    cap = Capacity({B: 10e6}, [(1.5, B, 0.0), (1.7, B, None)])
    assert cap.t_max(1, 2) == pytest.approx(8e6)
    shares = cap.shares([(0, 10), (5, 10)], 1, 2)
    assert shares[0] == pytest.approx(8e6) and shares[1] is None


def test_a_down_access_link_takes_only_its_flows_share():
    a1, a2 = ("r2", "d1"), ("r2", "d2")
    cap = Capacity({B: 10e6}, [(0.0, a1, 0.0), (0.5, a1, None)], paths=[[B, a1], [B, a2]])
    # first half: flow 0 can carry nothing, flow 1 the whole bottleneck; then half each
    shares = cap.shares([(0, 10), (0, 10)], 0, 1)
    assert shares == [pytest.approx(2.5e6), pytest.approx(7.5e6)]
    assert cap.t_max(0, 1) == pytest.approx(10e6)


def test_a_parking_lot_piece_by_piece():
    h1, h2 = ("r1", "r2"), ("r2", "r3")
    paths = [[h1, h2], [h1], [h2]]
    cap = Capacity({h1: 10e6, h2: 10e6}, [(2.0, h2, 4e6)], paths=paths)
    assert cap.t_max(0, 1) == pytest.approx(20e6)   # the long flow idle, each short one a whole hop
    assert cap.shares([(0, 9)] * 3, 0, 1) == [pytest.approx(5e6)] * 3
    # hop 2 at 4: the long flow and flow 2 get 2 each, flow 1 takes the rest of hop 1
    assert cap.shares([(0, 9)] * 3, 2, 3) == [pytest.approx(2e6), pytest.approx(8e6), pytest.approx(2e6)]
