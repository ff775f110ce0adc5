"""PAUSE on the hosts testbed over real SSH: namespaces with their own sshd as the hosts (tests/host/sshhosts.py),
cabled by veth pairs, which implement no Ethernet flow control.

A pause_chain spec asking for NIC flow control there must fail in preflight, before anything is set up on any
host, with one line naming the host, the node, the interface and its driver; `mode: auto` cannot fall back to
the emulated controller across machines and says so. The ethtool path itself runs over SSH through the
testbed (Ethtool.on); a NIC that has the pause API is tested in the vm tier
(tests/vm/guest/test_hosts_pause_ethtool.py, e1000e).
"""
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import CCRIG, ROOT
from experiments.commands import Commands
from experiments.errors import InputError
from topologies.hosts import HostsTestbed
from topologies.pause.ethtool import Ethtool, NicPause, PauseParams

from sshhosts import Host, SshHosts, pause_chain_spec


def chain_bed() -> SshHosts:
    """The pause_chain's four nodes as SSH hosts, cabled like a lab: s1 -> n1 -> n2 -> d1 (link B is n1's lab0
    to n2's lab0)."""
    hosts = [Host("s1", ["senders"], node="s1", interfaces={"n1": "lab0"}),
             Host("n1", ["routers"], node="n1", interfaces={"s1": "lab1", "n2": "lab0"}),
             Host("n2", ["routers"], node="n2", interfaces={"n1": "lab0", "d1": "lab1"}),
             Host("d1", ["receivers"], node="d1", interfaces={"n2": "lab0"})]
    cables = [("s1", "lab0", "n1", "lab1"), ("n1", "lab0", "n2", "lab0"), ("n2", "lab1", "d1", "lab0")]
    return SshHosts(hosts, cables)


@pytest.fixture(scope="module")
def bed():
    with chain_bed() as b:
        yield b




def ccrig_run(tmp_path: Path, spec: dict, inventory: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run([*CCRIG, "run", str(path), "--inventory", str(inventory), "--out", str(tmp_path / "runs"),
                           "--prometheus", "off", "--no-progress"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def host_state(bed: SshHosts) -> dict:
    """What a run would have changed on the hosts, seen from inside their namespaces (not over SSH)."""
    out = {}
    for h in bed.hosts:
        addrs = bed.exec(h, ["ip", "-br", "addr"]).stdout
        qdiscs = json.loads(bed.exec(h, ["tc", "-j", "qdisc", "show"]).stdout)
        out[h] = {"addresses": sorted(re.findall(r"198\.18\.\S+", addrs)),
                  "qdiscs": sorted({q["kind"] for q in qdiscs} - {"noqueue"}),
                  "forwarding": bed.exec(h, ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip()}
    return out


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ccrig: error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("mode", ["ethtool", "auto"])
def test_veth_nics_are_refused_before_anything_is_set_up(bed, tmp_path, mode):
    before = host_state(bed)
    p = ccrig_run(tmp_path, pause_chain_spec(mode), bed.inventory)
    line = one_line_error(p)
    # the first NIC checked: node n1's link-B interface, on inventory host n1, reached over SSH
    n1 = bed.hosts["n1"]
    assert f"interface lab0 (node n1 on host n1, {bed.operator}@{n1.address}:22) (driver veth)" in line, line
    assert "does not support Ethernet flow control" in line and "Operation not supported" in line, line
    # the way out: real NICs on router hosts, or the emulated controller where the nodes are namespaces
    assert "router hosts whose link-B NICs have flow control" in line and "testbed netns or vm" in line, line
    if mode == "auto":
        assert "auto cannot fall back to the emulated controller" in line, line
    # refused in preflight: no run directory, and every host exactly as it was
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    assert host_state(bed) == before
    assert all(s["addresses"] == [] and s["qdiscs"] == [] for s in before.values()), before
    assert not list(Path("/tmp").glob("ccrig-*-pause-ssh-*")), "preflight left its SSH control sockets"


def test_missing_interface_is_named(bed, tmp_path):
    inv = yaml.safe_load(bed.inventory.read_text())
    inv["all"]["children"]["routers"]["hosts"]["n2"]["ccrig_interfaces"]["n1"] = "ccrignope0"
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    before = host_state(bed)
    line = one_line_error(ccrig_run(tmp_path, pause_chain_spec("ethtool"), path))
    assert "host n2" in line and "'ccrignope0' does not exist" in line, line
    assert host_state(bed) == before


def test_frames_and_emulated_are_refused_on_hosts(bed, tmp_path):
    line = one_line_error(ccrig_run(tmp_path, pause_chain_spec("frames"), bed.inventory))
    assert "topology.pause.mode: got 'frames'" in line and "ethtool or auto on the hosts testbed" in line, line
    line = one_line_error(ccrig_run(tmp_path, pause_chain_spec("emulated"), bed.inventory))
    assert "testbed: got 'hosts'" in line and "netns or vm" in line, line


def test_ethtool_runs_over_ssh_through_the_testbed(bed, tmp_path):
    """Ethtool.on(hosts testbed, node): every command goes over the host's SSH connection (in the run's log),
    reads the driver and link there, and an unsupported NIC is an error naming host, node, interface and driver,
    with nothing changed (no ethtool -A was run)."""
    from topologies.pause_chain import PauseChainSpec
    spec = PauseChainSpec.model_validate(pause_chain_spec("ethtool")["topology"])
    topo = spec.build(flows=1)
    log = tmp_path / "commands.log"
    tb = HostsTestbed(topo, Commands(log), f"{bed.prefix}e", bed.inventory)
    try:
        assert tb.preflight() == []
        tool = Ethtool.on(tb, "n2")
        dev = tb.egress_device("n2", "n1")
        assert dev == "lab0"
        assert tool.exists(dev) and not tool.exists("ccrignope0")
        assert tool.driver(dev) == "veth"
        assert tool.carrier(dev)
        # the same answers as the namespace's own view: a down interface has no carrier
        bed.exec("d1", ["ip", "link", "set", "lab0", "down"])
        try:
            assert not Ethtool.on(tb, "n2").carrier("lab1")
        finally:
            bed.exec("d1", ["ip", "link", "set", "lab0", "up"])
        assert tool.driver_counters(dev) == {}
        where = f"node n2 on host n2, {bed.operator}@{bed.hosts['n2'].address}:22"
        with pytest.raises(InputError, match=re.escape(f"interface lab0 ({where}) (driver veth) does not support")):
            NicPause().enable(tool, dev, PauseParams(autoneg=False, rx=False, tx=True))
        with pytest.raises(InputError, match=re.escape(f"interface ccrignope0 ({where}) does not exist")):
            tool.get("ccrignope0")
        text = log.read_text()
        assert "ethtool -a lab0" in text and "ssh " in text
        assert "ethtool -A" not in text
    finally:
        tb.down()
