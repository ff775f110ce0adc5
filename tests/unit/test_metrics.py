"""The metric formulas against hand-computed values, and interval statistics."""
import math

import pytest

from ccrig.analysis import metrics, stats
from ccrig.analysis.intervals import FlowSeries, counter_at, flow_interval


def test_eee_uar_by_hand():
    # T = 8, G = 6, T_max = 10: EEE = 2/10 + 0.3*2/10 = 0.26; UAR = 1 - (0.5*0.8 + 0.5*0.75) = 0.225
    assert metrics.eee(8, 6, 10) == pytest.approx(0.26)
    assert metrics.uar(8, 6, 10) == pytest.approx(0.225)


def test_edge_cases():
    # nothing sent: all capacity unexploited; G/T taken as 0
    assert metrics.eee(0, 0, 10) == pytest.approx(0.3)
    assert metrics.uar(0, 0, 10) == pytest.approx(1.0)
    # perfect: G = T = T_max
    assert metrics.eee(10, 10, 10) == pytest.approx(0.0)
    assert metrics.uar(10, 10, 10) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        metrics.eee(1, 1, 0)


def test_jain():
    assert metrics.jain([5, 5, 5]) == pytest.approx(1.0)
    assert metrics.jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert metrics.jain([3, 1]) == pytest.approx(16 / 20)


def test_payload_capacity():
    assert metrics.payload_capacity(10e6) == pytest.approx(10e6 * 1448 / 1514)


def test_summarize_t_interval():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["n"] == 4
    assert s["std"] == pytest.approx(math.sqrt(5 / 3))
    half = 3.182446305284263 * s["std"] / 2  # t(0.975, 3)
    assert s["ci95"] == pytest.approx([2.5 - half, 2.5 + half])
    assert stats.measured([9, 1, 2], 1) == [1, 2]
    assert stats.summarize([])["mean"] is None


def test_repetitions_level():
    reps = [stats.summarize([1, 1]), stats.summarize([3, 3])]
    s = stats.over_repetitions(reps)
    assert s["mean"] == 2 and s["n"] == 2


def test_counter_interpolation():
    ts, vs = [0.5, 1.5], [100, 300]
    assert counter_at(ts, vs, 0.2) == 0        # before the first sample: the flow had not started
    assert counter_at(ts, vs, 1.0) == 200      # halfway
    assert counter_at(ts, vs, 9.0) == 300      # after the last: held


def test_flow_interval():
    samples = [(t / 10, {"bytes_acked": 1000 * t, "bytes_sent": 1100 * t, "data_segs_out": 10 * t,
                         "total_retrans": t // 2, "dsack_dups": 0, "rtt_us": 20000, "snd_cwnd": 10})
               for t in range(0, 21)]
    row = flow_interval(FlowSeries(samples), 0.5, 1.5, t_max=100e3)
    assert row["goodput_bps"] == pytest.approx(8 * 10000)   # 1000 bytes per 0.1 s
    assert row["throughput_bps"] == pytest.approx(8 * 11000)
    assert row["retrans_rate"] == pytest.approx(5 / 100)
    assert row["rtt_s"] == pytest.approx(0.02)
