"""The finite-file workload between two namespaces over a shaped link: every transfer completes, no faster
than the link allows, and flows wait their idle time between files."""
import os
import subprocess
import sys
import time

import pytest

from ccrig.commands import Commands
from ccrig.experiments.nodes.filexfer import read_csv
from ccrig.units import parse_rate
from ccrig.topologies.testbeds.netns import NetnsTestbed
from ccrig.topologies.topology import Egress, Topology

RATE = 8e6
SIZE = 100_000
IDLE = 0.3


@pytest.fixture
def pair(tmp_path):
    topo = Topology("filexfer")
    topo.add_node("s")
    topo.add_node("d")
    topo.add_link("s", "d", a_to_b=Egress(rate=parse_rate("8mbit")))
    bed = NetnsTestbed(topo, Commands(tmp_path / "commands.log"), prefix=f"ccF-fx{os.getpid()}")
    bed.up()
    yield bed
    bed.down()


def test_files_with_idle_time(pair, tmp_path):
    bed = pair
    server = bed.popen("d", [sys.executable, "-m", "ccrig.experiments.nodes.filexfer", "serve", "--port", "5301"],
                       stdout=subprocess.PIPE)
    try:
        assert server.stdout.readline().strip() == b"ready"
        out = tmp_path / "transfers.csv"
        t0 = time.time()
        p = bed.run("s", [sys.executable, "-m", "ccrig.experiments.nodes.filexfer", "send",
                          "--to", bed.address("d"), "--port", "5301", "--flows", "3", "--size", "100kb",
                          "--idle", "300ms", "--duration", "3s", "--cc", "reno", "--out", str(out)], timeout=60)
        assert p.returncode == 0
    finally:
        server.kill()
        server.wait()
    transfers = read_csv(out)
    assert {t.flow for t in transfers} == {0, 1, 2}
    for t in transfers:
        assert t.bytes == SIZE and t.completion_s is not None
        # no transfer beats the wire: the file alone needs SIZE * 8 / RATE seconds
        assert t.completion_s >= SIZE * 8 / RATE
        assert t0 <= t.t_start < t.t_end == pytest.approx(t.t_start + t.completion_s)
    for flow in range(3):
        mine = sorted((t for t in transfers if t.flow == flow), key=lambda t: t.transfer)
        assert [t.transfer for t in mine] == list(range(len(mine)))
        assert len(mine) >= 3
        # the next file starts only after the idle time that follows the previous one
        for a, b in zip(mine, mine[1:]):
            assert b.t_start - a.t_end >= IDLE - 0.01
        # none starts after the duration, counted from the sender's first start (not from t0: the sender's own
        # start-up under a busy CI took a second: 4.04 s from t0 in ci19)
        assert mine[-1].t_start - min(t.t_start for t in transfers) < 3.0 + 0.05


def test_bad_arguments():
    p = subprocess.run([sys.executable, "-m", "ccrig.experiments.nodes.filexfer", "send",
                        "--to", "127.0.0.1", "--port", "1", "--size", "80 apples", "--idle", "1s",
                        "--duration", "1s", "--out", "/dev/null"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "not a size: '80 apples'" in p.stderr
