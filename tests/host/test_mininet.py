"""The mininet testbed on the running kernel: Linux bridges and Open vSwitch's userspace datapath (this kernel has
no openvswitch module; the kernel datapath is tests/vm/guest/test_mininet_ovs.py's).

* the default spec reproduces its netns result with each switch kind (tests/host/reproduce.py: system goodput
  within 10 % as it is, every flow within 10 % when each is held to its own access link);
* the testbed realises the Topology as netns does: wire-sized packets everywhere, the bottleneck's htb + pfifo on
  r1, routes, the chosen switch on every link; Linux bridges in the run's device group, whose one-request
  teardown spares a device of someone else's in it;
* `mn --custom topologies/mn_<name>.py --topo <name>,...` loads and pings all (in a network namespace of its own,
  so Mininet's fixLimits cannot retune this machine's TCP defaults);
* nothing is left after a run, after a failed setup, and after a killed run plus `ccrig clean`.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import reproduce
from conftest import CCRIG, ROOT, Ccrig
from ccrig.experiments import spec as specmod
from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.topologies.testbeds.mininet import RECORDS, MininetTestbed, Names, leftovers, switches

DEFAULT = ROOT / "experiments/specs/default.yaml"
SWITCHES = ["lxbr", "ovs-user"]


def ovs_running() -> bool:
    return subprocess.run([switches.OVS_CTL, "status"], capture_output=True).returncode == 0


def run_pid(run_dir: Path) -> int:
    return int(run_dir.name.rsplit("-", 1)[1])


def system_state(prefix: str) -> list[str]:
    """What a run with this prefix left, seen without the testbed's own bookkeeping: Mininet shells, processes
    marked as started on its nodes, root-namespace interfaces with its switch tag, OVS bridges, its record."""
    out = []
    shells = subprocess.run(["pgrep", "-a", "-f", f"mininet:{prefix}-"], capture_output=True, text=True).stdout
    out += shells.splitlines()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"CCRIG_NODE={prefix}-".encode() in Path(f"/proc/{pid}/environ").read_bytes():
                out.append(f"process {pid}")
        except OSError:
            pass
    tag = Names(prefix).switch(0)[:-2]
    out += [n for n in os.listdir("/sys/class/net") if n.startswith(tag)]
    if ovs_running():
        bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
        out += [f"ovs bridge {b}" for b in bridges if b.startswith(tag)]
    if (RECORDS / f"{prefix}.json").exists():
        out.append(f"record {prefix}")
    return out


def default_spec() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


@pytest.fixture(scope="module")
def ovs_was_running():
    return ovs_running()


@pytest.fixture(scope="module")
def netns_reference(tmp_path_factory) -> Path:
    ccrig = Ccrig(tmp_path_factory.mktemp("netns"), None)
    p = ccrig.run(reproduce.default_spec(), "--set", "testbed=netns")
    assert p.returncode == 0, p.stderr
    return ccrig.run_dirs()[-1]


@pytest.mark.parametrize("switch", SWITCHES)
def test_default_spec_goodput_matches_netns(ccrig, netns_reference, ovs_was_running, switch):
    p = ccrig.run(reproduce.default_spec(), "--set", "testbed=mininet", "--set", f"mininet.switch={switch}")
    assert p.returncode == 0, p.stderr
    summary = ccrig.summary()
    assert summary["testbed"] == "mininet" and summary["complete"]
    reproduce.check(netns_reference, ccrig.run_dirs()[-1], f"mininet ({switch})")
    run_dir = ccrig.run_dirs()[-1]
    log = (run_dir / "commands.log").read_text()
    assert "mnexec -a" in log and "qdisc add dev eth0 root handle 1: htb" in log  # tc -batch lines
    prefix = f"ccrig-{run_pid(run_dir)}"
    assert system_state(prefix) == [] and leftovers(prefix) == []
    if switch == "ovs-user" and not ovs_was_running:
        assert "ovs-ctl start" in log and "ovs-ctl stop" in log and not ovs_running()


@pytest.mark.parametrize("switch", SWITCHES)
def test_testbed_realises_the_topology_like_netns(switch, ovs_was_running):
    raw = default_spec()
    raw.update(testbed="mininet", mininet={"switch": switch}, flows=[{"count": 2}])
    exp = specmod.validate(raw, "test")
    topo = exp.topology.build(exp.n_flows)
    prefix = f"ccrig-mnt{os.getpid()}"
    foreign = f"mntkeep{os.getpid() % 100000}"
    tb = MininetTestbed(topo, Commands(None), prefix, exp.mininet)
    try:
        tb.up()
        assert tb.switch == switch
        # the bottleneck: htb at the rate, pfifo with the buffer under it, on r1 toward r2 (as netns has it)
        dev = tb.egress_device("r1", "r2")
        tree = json.loads(tb.run("r1", ["tc", "-j", "qdisc", "show", "dev", dev]).stdout)
        kinds = {(q["kind"], q.get("parent", "root")) for q in tree}
        assert ("htb", "root") in kinds and ("pfifo", "1:1") in kinds
        assert next(q for q in tree if q["kind"] == "pfifo")["options"]["limit"] == 100
        # wire-sized packets on every node interface and every switch port
        for node, ifs in topo.interfaces().items():
            for x in ifs:
                link = json.loads(tb.run(node, ["ip", "-j", "-d", "link", "show", "dev", x.name]).stdout)[0]
                assert link["gso_max_segs"] == 1 and link["gso_max_size"] == 1514, (node, x.name)
                feats = tb.run(node, ["ethtool", "-k", x.name]).stdout
                for f in ("tcp-segmentation-offload: off", "generic-segmentation-offload: off",
                          "generic-receive-offload: off"):
                    assert f in feats, (node, x.name, f)
        for i in range(len(topo.links)):
            for end in "ab":
                port = tb.names.port(i, end)
                link = json.loads(subprocess.run(["ip", "-j", "-d", "link", "show", "dev", port],
                                                 capture_output=True, text=True, check=True).stdout)[0]
                assert link["gso_max_segs"] == 1, port
        # every link crosses a switch of the chosen kind
        sw = tb.names.switch(0)
        if switch == "lxbr":
            assert sorted(os.listdir(f"/sys/class/net/{sw}/brif")) == [tb.names.port(0, "a"), tb.names.port(0, "b")]
            # bridges and ports in the run's device group, which teardown deletes in one request
            assert int(Path(f"/sys/class/net/{sw}/netdev_group").read_text()) == tb.names.group()
            # ... but never a device of someone else's that joined the group: then they go one by one
            subprocess.run(["ip", "link", "add", foreign, "group", str(tb.names.group()), "type", "bridge"],
                           check=True)
        else:
            dp = subprocess.run(["ovs-vsctl", "get", "bridge", sw, "datapath_type"], capture_output=True,
                                text=True).stdout.strip()
            assert dp == "netdev"
        # routed end to end, and the node's view is its own namespace
        ping = tb.run("s1", ["ping", "-c", "3", "-i", "0.2", "-W", "2", tb.address("d1")], check=False)
        assert ping.returncode == 0, ping.stdout
        assert tb.run("r1", ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip() == "1"
        assert system_state(prefix), "the network is up"
    finally:
        tb.down()
        kept = os.path.exists(f"/sys/class/net/{foreign}")
        subprocess.run(["ip", "link", "del", foreign], capture_output=True)
    assert system_state(prefix) == [] and leftovers(prefix) == []
    assert kept == (switch == "lxbr")
    if not ovs_was_running:
        assert not ovs_running()


def test_setup_failure_half_way_leaves_nothing(ovs_was_running):
    """Mininet builds the network, then a node's setup fails (an MTU veth refuses): up() raises a RunError and
    down() removes everything, the half-configured network included."""
    raw = default_spec()
    raw.update(testbed="mininet", mininet={"switch": "ovs-user"}, flows=[{"count": 1}])
    exp = specmod.validate(raw, "test")
    topo = exp.topology.build(1)
    # above veth's 65535, past the spec's own range check (MTU 576..9000): only setup can fail on it now
    topo.mtu = 100000
    prefix = f"ccrig-mnf{os.getpid()}"
    tb = MininetTestbed(topo, Commands(None), prefix, exp.mininet)
    try:
        with pytest.raises(RunError, match="command failed"):
            tb.up()
        assert system_state(prefix), "the network was up when setup failed"
    finally:
        tb.down()
    assert system_state(prefix) == [] and leftovers(prefix) == []
    if not ovs_was_running:
        assert not ovs_running()


def test_kernel_datapath_is_checked_before_setup(ccrig):
    """Whichever case this kernel presents: without the openvswitch module, `mininet.switch: ovs` is an input
    error naming the kernel and the way out; with it (a distribution kernel), preflight finds the kernel
    datapath (the vm tier runs on it: tests/vm/guest/test_mininet_ovs.py)."""
    argv = ["--set", "testbed=mininet", "--set", "mininet.switch=ovs"]
    if switches.ovs_kernel_datapath(Commands(None)):
        p = subprocess.run([*CCRIG, "preflight", str(ccrig.write(default_spec())), *argv, "--json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        needs = {n["feature"]: n for n in json.loads(p.stdout)["needs"]}
        assert needs["the Open vSwitch kernel datapath"]["ok"] is True, needs
        assert "openvswitch module" not in p.stderr, p.stderr
        return
    p = ccrig.run(default_spec(), *argv)
    assert p.returncode == 2, p.stderr
    assert "openvswitch" in p.stderr and platform.release() in p.stderr and "ovs-user" in p.stderr
    assert p.stderr.count("\n") == 1


def test_killed_run_then_ccrig_clean_leaves_nothing(ccrig, ovs_was_running):
    spec = ccrig.write(default_spec())
    argv = ccrig.argv(spec, "--set", "testbed=mininet", "--set", "mininet.switch=ovs-user",
                      "--set", "flows=[{count: 2, cc: cubic}]", "--set", "duration=30s")
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline and not list(ccrig.tmp.glob("runs/*/points/000/rep0/intervals.csv")):
        time.sleep(0.1)
    time.sleep(1.5)
    p.kill()  # SIGKILL: no teardown runs
    p.wait()
    prefix = f"ccrig-{p.pid}"
    left = system_state(prefix)
    assert any(x.startswith("process") for x in left) and any(x.startswith("ovs bridge") for x in left), left
    c = subprocess.run([*CCRIG, "clean", "--prefix", f"{prefix}-"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert c.returncode == 0, c.stderr
    assert system_state(prefix) == [] and leftovers(prefix) == [], c.stdout
    if not ovs_was_running:
        assert not ovs_running(), c.stdout


@pytest.mark.parametrize("name,topo", [("dumbbell", "dumbbell,2,bottleneck.rate=20mbit"),
                                       ("pause_chain", "pause_chain,2,scale=10")])
def test_mn_custom_loads_each_topology_file(name, topo):
    if not shutil.which("mn"):
        pytest.fail("mn is missing: install the Debian package mininet (`make deps`)")
    # a network namespace of mn's own: Mininet.init rewrites net.ipv4.tcp_[rw]mem, which new namespaces copy
    p = subprocess.run(["unshare", "--net", "mn", "--custom", f"topologies/mn_{name}.py", "--topo", topo,
                        "--switch", "lxbr", "--controller", "none", "--test", "pingall"],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Results: 0% dropped" in out, out[-2000:]
