"""Host tier: root, real namespaces, tc, iperf3 and a real Prometheus server on the running kernel."""
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import pytest
import yaml

from ccrig.commands import OWN_SWITCH

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()"]


_beds = count()   # two_nodes beds of this worker


@contextmanager
def veth_namespace(ns: str, a: str, b: str, commands=None, up: bool = False):
    """A scratch network namespace holding one veth pair a <-> b (both up if asked), deleted afterwards;
    yields the Commands that made it."""
    from ccrig.commands import Commands
    c = commands or Commands()
    c.run(["ip", "netns", "add", ns])
    try:
        c.run(["ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b])
        for dev in (a, b) if up else ():
            c.run(["ip", "-n", ns, "link", "set", dev, "up"])
        yield c
    finally:
        c.ok(["ip", "netns", "delete", ns])


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/host/" in str(item.fspath):
            item.add_marker(pytest.mark.host)


@pytest.fixture(scope="session", autouse=True)
def need_root():
    if os.geteuid() != 0:
        pytest.fail("the host tier needs root (network namespaces, tc)")


@pytest.fixture(scope="session", autouse=True)
def calibrated_first(calibrated):
    """tests/conftest.py's calibration, before this tier's first test."""


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory):
    """A Prometheus server of this test session's own, stopped at the end."""
    from ccrig.experiments.telemetry.prometheus_server import PrometheusServer
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


def dumbbell(flows, duration="8s", rate="10mbit", buffer="100pkt", **extra) -> dict:
    spec = {"name": "hosttest", "testbed": "netns",
            "topology": {"name": "dumbbell", "bottleneck": {"rate": rate, "buffer": buffer, "qdisc": "pfifo"}},
            "flows": flows, "duration": duration, "interval": "1s", "warmup": 1}
    spec.update(extra)
    return spec


class Ccrig:
    """Runs the real `ccrig` command line in a subprocess, as a researcher would."""

    def __init__(self, tmp_path: Path, prometheus_dir: Path | None):
        self.tmp, self.prom = tmp_path, prometheus_dir

    def write(self, spec: dict, name: str = "spec.yaml") -> Path:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path

    def argv(self, spec: Path, *extra) -> list[str]:
        argv = [*CCRIG, "run", str(spec), "--out", str(self.tmp / "runs"), "--no-progress"]
        argv += ["--prometheus-dir", str(self.prom)] if self.prom else ["--prometheus", "off"]
        return argv + list(extra)

    def run(self, spec: dict, *extra, timeout=300) -> subprocess.CompletedProcess:
        """The finished run, with its pid (the names it makes on this machine start ccrig-PID-)."""
        argv = self.argv(self.write(spec), *extra)
        p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
        done = subprocess.CompletedProcess(argv, p.returncode, out, err)
        done.pid = p.pid
        return done

    def run_dirs(self) -> list[Path]:
        return sorted((self.tmp / "runs").glob("*")) if (self.tmp / "runs").exists() else []

    def summary(self) -> dict:
        return json.loads((self.run_dirs()[-1] / "summary.json").read_text())


@pytest.fixture
def two_nodes(tmp_path):
    """Two namespaces, a and b, on one link of the netns testbed (its own name: prefix, pid and a counter)."""
    from ccrig.commands import Commands
    from ccrig.topologies.testbeds.netns import NetnsTestbed
    from ccrig.topologies.topology import Topology
    topo = Topology("pair")
    topo.add_node("a"), topo.add_node("b")
    topo.add_link("a", "b")
    bed = NetnsTestbed(topo, Commands(tmp_path / "commands.log"), f"ccrig-t2-{os.getpid()}-{next(_beds)}")
    bed.up()
    try:
        yield bed
    finally:
        bed.down()


@pytest.fixture
def ccrig(tmp_path):
    return Ccrig(tmp_path, None)


@pytest.fixture
def ccrig_prom(tmp_path, prometheus):
    return Ccrig(tmp_path, prometheus.root)


def leftovers(pid: int) -> list[str]:
    """What a ccrig process with this pid left behind: namespaces with its prefix, processes in none."""
    prefix = f"ccrig-{pid}-"
    ns = [n for n in os.listdir("/run/netns") if n.startswith(prefix)] if os.path.isdir("/run/netns") else []
    # in a namespace by `ip netns exec`, or by the program's own switch (commands.OWN_SWITCH)
    ways = "|".join(["ip netns exec", *(f"{p} {flag}" for p, flag in OWN_SWITCH.items())])
    procs = subprocess.run(["pgrep", "-a", "-f", f"({ways}) {prefix}"], capture_output=True, text=True).stdout
    return ns + procs.splitlines()
