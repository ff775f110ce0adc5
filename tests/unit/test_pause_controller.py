"""The XOFF/XON hysteresis and the 802.3x quanta state machine, step by step."""
import math

import pytest

from ccrig.topologies.pause.agent.controller import (MAX_QUANTA, Frame, PauseLink, PauseReceiver, XoffXon, quanta_seconds,
                                         seconds_to_quanta)

GBIT = 1e9


def test_quanta_are_512_bit_times():
    assert quanta_seconds(1, GBIT) == pytest.approx(512e-9)
    assert quanta_seconds(MAX_QUANTA, 10e6) == pytest.approx(65535 * 512 / 10e6)
    assert seconds_to_quanta(512e-9 * 100, GBIT) == 100
    assert seconds_to_quanta(10.0, GBIT) == MAX_QUANTA   # clamped to the 16-bit field
    assert seconds_to_quanta(0.0, GBIT) == 1             # an XOFF never carries 0 (that is XON)


def test_hysteresis_crossings_on_off():
    c = XoffXon(high=5, low=3)
    # rising to T1 is not a crossing; T1 + 1 is (transition 8)
    assert [c.step(0, q) for q in (0, 3, 5)] == [None, None, None]
    f = c.step(0, 6)
    assert f is not None and not f.is_xon and c.congested
    # between T2 and T1 the last crossing holds, in both directions
    assert [c.step(0, q) for q in (6, 5, 4, 3, 7, 3)] == [None] * 6
    # below T2 (transition 5: T2 -> T2 - 1) is XON
    assert c.step(0, 2) == Frame(0)
    assert not c.congested
    # and a rise back through T2..T1 does not pause again until above T1
    assert [c.step(0, q) for q in (3, 4, 5)] == [None, None, None]
    assert c.step(0, 6) is not None


def test_equal_thresholds():
    c = XoffXon(high=4, low=4)
    assert c.step(0, 4) is None
    assert not c.step(0, 5).is_xon
    assert c.step(0, 4) is None          # not below T2 yet
    assert c.step(0, 3).is_xon


def test_on_off_has_no_refresh():
    c = XoffXon(high=2, low=1)
    c.step(0.0, 3)
    assert c.next_deadline() is None
    assert c.step(100.0, 3) is None


def test_quanta_refresh_while_congested_then_xon():
    c = XoffXon(high=2, low=1, quanta=1000, refresh=0.5)
    first = c.step(0.0, 3)
    assert first == Frame(1000) and not first.refresh
    assert c.next_deadline() == 0.5
    assert c.step(0.4, 2) is None                    # still congested, refresh not due
    assert c.step(0.5, 2) == Frame(1000, refresh=True)
    assert c.next_deadline() == 1.0
    assert c.step(0.7, 0).is_xon                     # below T2: pause time 0
    assert c.next_deadline() is None
    assert c.step(2.0, 1) is None


@pytest.mark.parametrize("kw", [dict(high=3, low=4), dict(high=3, low=0), dict(high=3, low=2, quanta=0, refresh=1),
                                dict(high=3, low=2, quanta=65536, refresh=1), dict(high=3, low=2, quanta=10)])
def test_bad_settings(kw):
    with pytest.raises(ValueError):
        XoffXon(**kw)


def test_receiver_timer_replaced_not_added():
    r = PauseReceiver(link_bps=512.0)    # one quantum = 1 s
    r.receive(0.0, Frame(10))
    assert r.paused(9.9) and not r.paused(10.0)
    r.receive(5.0, Frame(2))             # a new PAUSE replaces the running timer
    assert not r.paused(7.0)
    r.receive(8.0, Frame(100))
    r.receive(9.0, Frame(0))             # XON releases at once
    assert not r.paused(9.0)


def test_receiver_on_off_holds_until_xon():
    r = PauseReceiver(link_bps=512.0, timed=False)
    r.receive(0.0, Frame(1))
    assert r.paused(1e9)
    r.receive(3.0, Frame(0))
    assert not r.paused(3.0)


def test_link_accounting_on_off():
    link = PauseLink(high=4, low=2, link_bps=1e6)
    assert link.step(0.0, 4) == (None, None)
    frame, change = link.step(1.0, 5)
    assert change == "paused" and link.xoff == 1 and link.paused
    assert link.step(2.0, 3) == (None, None)
    assert link.time_paused(2.5) == pytest.approx(1.5)
    frame, change = link.step(3.0, 1)
    assert frame.is_xon and change == "running"
    assert (link.xoff, link.xon, link.refreshes, link.expiries) == (1, 1, 0, 0)
    assert link.time_paused(10.0) == pytest.approx(2.0)
    assert link.next_deadline() is None


def test_link_never_pauses_when_high_is_the_buffer():
    # T1 = B2: the queue can hold at most B2 packets, so occupancy never exceeds T1
    link = PauseLink(high=20, low=20, link_bps=1e6)
    for t, q in enumerate([0, 5, 20, 20, 19, 20, 0]):
        assert link.step(float(t), q) == (None, None)
    assert (link.xoff, link.xon, link.time_paused(10.0)) == (0, 0, 0.0)


def test_link_quanta_refresh_keeps_it_paused():
    # 512 bit/s: one quantum is one second; pause 4 s, refreshed every 2 s by default
    link = PauseLink(high=1, low=1, link_bps=512.0, quanta=4)
    assert link.refresh == 2.0
    assert link.step(0.0, 2)[1] == "paused"
    assert link.next_deadline() == 2.0
    frame, change = link.step(2.0, 2)
    assert frame == Frame(4, refresh=True) and change is None
    assert link.receiver.paused_until == 6.0
    frame, change = link.step(5.0, 0)
    assert frame.is_xon and change == "running"
    assert (link.xoff, link.refreshes, link.xon, link.expiries) == (1, 1, 1, 0)
    assert link.time_paused(5.0) == pytest.approx(5.0)


def test_link_quanta_expiry_without_refresh():
    # refresh slower than the pause time: the upstream resumes on its own while still congested
    link = PauseLink(high=1, low=1, link_bps=512.0, quanta=2, refresh=5.0)
    assert link.step(0.0, 3)[1] == "paused"
    assert link.next_deadline() == 2.0
    assert link.tick(1.9) is None
    assert link.tick(2.0) == "running"
    assert link.expiries == 1 and link.time_paused(3.0) == pytest.approx(2.0)
    # the refresh, when it comes, pauses it again
    frame, change = link.step(5.0, 3)
    assert frame.refresh and change == "paused"
    assert link.xoff == 1 and link.refreshes == 1
    assert not math.isinf(link.next_deadline())
