"""A repetition whose own loop falls behind the interval clock still puts every drop in the interval it
happened in (experiments/run/measurement.py's settling, analysis/counters.py): the real kernel, tc and the BPF
loss program, with the loop made late on purpose as twelve pairs on two cores made it (study 001, 2026-12-07)."""
import csv
import json
import subprocess
import sys

from conftest import ROOT

LOSS = 0.05
# the runner with each interval's work made 1.8 s long: by the run's end it reads its counters ~6 s late
SLOW = """
import time
from ccrig.experiments.run import measurement
interval = measurement.Measurement._interval
def late(self, k, prev, tables):
    q = interval(self, k, prev, tables)
    time.sleep(1.8)
    return q
measurement.Measurement._interval = late
from ccrig.experiments.cli.entry import main
main()
"""


def test_a_late_loop_puts_each_drop_in_its_own_interval(tmp_path):
    spec = {"name": "lateloop", "testbed": "netns",
            "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "100pkt", "qdisc": "pfifo"},
                         "loss": LOSS},
            "flows": [{"cc": "cubic"}], "duration": "8s", "interval": "1s", "warmup": 2}
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))
    p = subprocess.run([sys.executable, "-c", SLOW, "run", str(path), "--out", str(tmp_path / "runs"),
                        "--no-progress", "--prometheus", "off"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rep = next((tmp_path / "runs").glob("*")) / "points/000/rep0"
    entry = json.loads((rep / "repetition.json").read_text())
    assert entry["settled"]["counters_latest_s"] > 3, entry["settled"]   # the loop was late indeed
    rows = [r for r in csv.DictReader(open(rep / "intervals.csv")) if r["flow"] == "all"]
    dropped = [float(r["link_dropped"]) for r in rows[2:]]
    # ~800 packets a second at 5 %: an interval without a drop is the loop's doing, not the draw's
    assert len(dropped) == 6 and min(dropped) > 0, dropped
    assert abs(entry["system"]["loss"]["mean"] - LOSS) < 0.02, entry["system"]["loss"]
    drawn = entry["loss_drawn"]
    assert drawn["offered"] > 0.7 * sum(float(r["throughput_bps"]) for r in rows[2:]) / (8 * 1514), drawn
    assert abs(drawn["value"]) < 0.02, drawn
    # the fidelity monitor's bottleneck reads what the flow carried, not a queue that never dequeued
    fid = entry["fidelity"]
    assert abs(fid["dequeue_of_rate"] - fid["goodput_of_t_max"]) < 0.15, fid
