"""The sampler's reader: every line the sampler wrote is read, however late the reader runs, and the file it
writes to gives its room back as it is read (experiments/run/collectors.py)."""
import os
import sys

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
