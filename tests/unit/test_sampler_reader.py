"""The sampler's reader: every line the sampler wrote is read, however late the reader runs, and the file it
writes to gives its room back as it is read (experiments/run/collectors.py)."""
import os
import random
import sys
import threading

from ccrig.analysis.intervals import FlowSeries
from ccrig.commands import Commands
from ccrig.experiments.run import collectors

LINES = 3000
WRITER = (f"import json, sys\nfor i in range({LINES}):\n"
          "    sys.stdout.write(json.dumps({'t': 1000.0 + i, 's': {'1:2': {'bytes_acked': i}}, 'cpu': 0.1}) + '\\n')\n")


class Bed:
    """Just what FlowSampler asks of a testbed, here on this machine."""
    def clock_offset(self, node):
        return 0.0

    def popen(self, node, argv, stdout, stderr):
        return Commands(None).popen(argv, stdout=stdout, stderr=stderr)


def test_every_line_is_read_and_the_read_part_freed(monkeypatch):
    monkeypatch.setattr(collectors, "READ_BEHIND", 64 << 10)
    s = collectors.FlowSampler(Bed(), "n", ["1:2"], 0.02, t0=1000.0, program=[sys.executable, "-c", WRITER, "--"])
    s.proc.wait(timeout=60)
    s.thread.join(timeout=60)
    got = s.snapshot("1:2")
    assert [f["bytes_acked"] for _, f in got] == list(range(LINES)) and got[-1][0] == LINES - 1
    size, blocks = os.fstat(s.out.fileno()).st_size, os.fstat(s.out.fileno()).st_blocks * 512
    assert size > 64 << 10 and blocks < size, (size, blocks)   # the read part's blocks were given back
    s.stop()
    assert s.out.closed


def test_an_intervals_window_reads_as_every_sample_does():
    """An interval reads its counters from the samples around it (FlowSampler.window), not from every sample since
    the sampler started: the same deltas, means and minima at any boundaries, before the first sample and after
    the last included."""
    rng = random.Random(7)
    s = collectors.FlowSampler.__new__(collectors.FlowSampler)
    s.t0, s.lock = 1000.0, threading.Lock()
    t, acked, rows = 1000.5, 0, []
    for _ in range(400):   # irregular polls, some late, some at the same instant
        t += rng.choice([0.0, 0.02, 0.02, 0.05, 0.7])
        acked += rng.randrange(0, 3000)
        rows.append((t, {"bytes_acked": acked, "rtt_us": rng.randrange(1, 9000), "min_rtt_us": rng.randrange(1, 99)}))
    s.samples = {"k": rows}
    whole = FlowSeries(s.snapshot("k"))
    edges = [-1.0, 0.0, 0.5, t - 1000.0, t - 1000.0 + 3] + [rng.uniform(-1, t - 998) for _ in range(200)]
    edges += [r[0] - 1000.0 for r in rng.sample(rows, 50)]   # boundaries exactly on a sample
    for a in edges:
        b = a + rng.choice([0.02, 0.5, 1.0, 2.0])
        part = FlowSeries(s.window("k", a, b))
        assert part.delta("bytes_acked", a, b) == whole.delta("bytes_acked", a, b), (a, b)
        assert part.mean("rtt_us", a, b) == whole.mean("rtt_us", a, b), (a, b)
        assert part.minimum("min_rtt_us", a, b) == whole.minimum("min_rtt_us", a, b), (a, b)
    assert len(s.window("k", 2.0, 3.0)) < len(rows) / 4
