"""The study bench's `agree` (tests/bench/bench_study.same_goodput): side by side measures alone's goodput within
AGREE_MARGIN, judged as a study's claim is, not by whether two intervals overlap."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_study import AGREE_MARGIN, same_goodput  # noqa: E402

ALONE = {0: 95.525e6, 1: 95.579e6, 2: 95.472e6, 3: 95.551e6, 4: 95.530e6, 5: 95.560e6, 6: 95.498e6, 7: 95.540e6}


def _shifted(by: float) -> dict[int, float]:
    return {r: g * (1 + by) for r, g in ALONE.items()}


def test_a_tiny_real_difference_is_agreement():
    # side by side 0.07 % higher with tight spreads: the intervals need not overlap, the goodput is the same
    same = same_goodput(ALONE, _shifted(0.0007))
    assert same["agree"] is True and same["verdict"] == "no-difference"
    assert same["interval"][0] > 0   # a real difference, smaller than what matters
    assert same["margin"] == AGREE_MARGIN


def test_a_difference_beyond_the_margin_is_not():
    same = same_goodput(ALONE, _shifted(-0.02))
    assert same["agree"] is False and same["verdict"] == "fails"
    assert same["interval"][1] < -AGREE_MARGIN


def test_too_few_or_too_spread_repetitions_say_nothing():
    assert same_goodput({0: 1e6}, ALONE)["agree"] is None
    wide = {0: 90e6, 1: 100e6}
    same = same_goodput(ALONE, wide)
    assert same["agree"] is False and same["verdict"] == "undecided"
