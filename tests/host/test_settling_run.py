"""The warm-up checked on a real run (analysis/settling.py through `ccrig run`): one reno flow slow-starting over a
0.5 s RTT into a 10 Mbit/s link (iperf3's set-up and about 5 round trips to fill it: full by about 6 s) is still
rising in a window that starts at once, and the run says so; behind an 8-s warm-up it is steady, and nothing is
said."""
from __future__ import annotations

import pytest

from conftest import dumbbell

# the window capped at 500 packets (the route's lock) above the BDP (417) and below BDP + buffer (617): slow start
# ends at the cap without a loss and the link stays full, so the only transient is the ramp
FLOW = [{"cc": "reno", "max_window": 500}]
LINK = {"rate": "10mbit", "buffer": "200pkt"}


def _run(ccrig, duration: str, warmup: int):
    spec = dumbbell(FLOW, duration=duration, rate=LINK["rate"], buffer=LINK["buffer"], repetitions=3, seed=5)
    spec.update(warmup=warmup)
    spec["topology"]["rtt"] = "500ms"
    p = ccrig.run(spec, "--jobs", "3", timeout=280)
    assert p.returncode == 0, p.stderr
    return p, ccrig.summary()["points"][0]


@pytest.mark.timeout(300)
def test_a_ramp_inside_the_measured_window_is_named_and_behind_the_warm_up_it_is_not(ccrig):
    p, point = _run(ccrig, "10s", 0)
    settle = point["settling"]
    print(f"\nno warm-up: drift {settle['drift']:+.2f} (each {settle['drifts']}), p {settle['p']:.3g}")
    assert settle["repetitions"] == 3 and not settle["settled"]
    assert settle["drift"] < -0.5   # the second half carried well over the first: it rose
    assert any("still settling after the warm-up of 0 intervals: it rose by" in x
               for x in point["measurement_problems"])
    assert "still settling" in p.stdout   # the run's table says it
    p, point = _run(ccrig, "16s", 8)
    settle = point["settling"]
    print(f"an 8-s warm-up: drift {settle['drift']:+.2f} (each {settle['drifts']}), p {settle['p']:.3g}")
    assert settle["settled"] and abs(settle["drift"]) < 0.1
    assert not any("still settling" in x for x in point["measurement_problems"])
    assert "still settling" not in p.stdout
