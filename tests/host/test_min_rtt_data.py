"""A flow's least RTT is measured from its data packets: TCP's own min_rtt keeps the handshake's sample (a SYN
through an idle shaper, microseconds on netns), the data packets' least smoothed RTT cannot go below the path's
floor, and a healthy run lists no measurement problem for it (experiments/run/summary.py: data_min_rtt)."""
import json

from conftest import dumbbell, leftovers


def test_the_floor_check_reads_data_packets_not_the_handshake(ccrig):
    done = ccrig.run(dumbbell([{"cc": "cubic"}], duration="4s"), timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert leftovers(done.pid) == []
    rep = json.loads((ccrig.run_dirs()[-1] / "points/000/rep0/repetition.json").read_text())
    floor = rep["min_rtt_floor_s"]
    [flow] = rep["flows"]
    # 10 Mbit/s, no added delay: one 1514-byte frame's transmission, 1.21 ms
    assert 1.2e-3 < floor < 1.25e-3
    # the kernel's filter kept the handshake's RTT, which no full-size data packet can have
    assert flow["min_rtt_s"]["mean"] < floor
    # the data packets' least (smoothed) RTT lies above the floor, and nothing is reported about it
    assert flow["data_min_rtt_s"] >= floor
    assert not [p for p in rep["measurement_problems"] if "floor" in p], rep["measurement_problems"]
    printed = [x for x in done.stdout.splitlines() if x.startswith("measurement problem")]
    assert not [x for x in printed if "RTT" in x], printed
