"""PAUSE on the hosts testbed over real SSH: namespaces with their own sshd as the hosts (tests/support/sshhosts.py),
cabled by veth pairs, which implement no Ethernet flow control.

A pause_chain spec asking for NIC flow control there must fail in preflight, before anything is set up on any
host, with one line naming the host, the node, the interface and its driver. `mode: auto` falls back to the
emulated controller, as on cloud VMs: it runs on node 2's host and signals node 1's agent over link B, and
the hosts are left as they were, also after Ctrl-C. The ethtool path itself runs over SSH through the testbed
(Ethtool.on); a NIC that has the pause API is tested in the vm tier (tests/vm/guest/test_hosts_pause_ethtool.py,
e1000e).
"""
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from ccrig.commands import Commands
from ccrig.errors import InputError
from ccrig.topologies.testbeds.hosts import HostsTestbed
from ccrig.topologies.pause.ethtool import Ethtool, NicPause, PauseParams

from support.interrupt import default_sigint
from support.sshhosts import Host, SshHosts, pause_chain_spec

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")


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


def agents(run_pid: int) -> list[str]:
    """The PAUSE programs of run run_pid running on the hosts from their copies there (the sshd namespaces
    share our pids; the local ssh clients' command lines name the program too, but do not start with it)."""
    return subprocess.run(["pgrep", "-f", f"^python3 /tmp/ccrig-{run_pid}-n[12]/pause_agent.pyz"],
                          capture_output=True, text=True).stdout.split()


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ccrig: error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("mode", ["ethtool", "frames"])
def test_veth_nics_are_refused_before_anything_is_set_up(bed, ccrig, tmp_path, mode):
    before = bed.state()
    p = ccrig.run(pause_chain_spec(mode), "--inventory", str(bed.inventory))
    line = one_line_error(p)
    # the first NIC checked: node n1's link-B interface (ethtool: rx; frames: it must honour real frames)
    n1 = bed.hosts["n1"]
    assert f"interface lab0 (node n1 on host n1, {bed.operator}@{n1.address}:22) (driver veth)" in line, line
    assert "does not support Ethernet flow control" in line and "Operation not supported" in line, line
    # the ways out: real NICs on router hosts, or the emulated controller across the hosts
    assert "router hosts whose link-B NICs have flow control" in line and "pause.mode emulated (or auto)" in line
    # refused in preflight: no run directory, and every host exactly as it was
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    assert bed.state() == before
    assert all(s["addresses"] == [] and s["qdiscs"] == [] for s in before.values()), before
    assert not list(Path("/tmp").glob(f"ccrig-{p.pid}-*")), "preflight left its SSH control sockets"


def test_auto_falls_back_to_the_controller_across_hosts(bed, ccrig, tmp_path):
    """Virtual NICs (here veth; on cloud VMs virtio): auto runs the XOFF/XON controller on n2's host, watching
    its queue toward d1, and n1's agent shapes link B as the controller signals it over link B."""
    before = bed.state()
    spec = pause_chain_spec("auto")
    spec["duration"] = "4s"
    p = ccrig.run(spec, "--inventory", str(bed.inventory))
    assert p.returncode == 0, p.stderr
    run = next((tmp_path / "runs").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    pause = summary["points"][0]["repetitions"][0]["pause"]
    assert pause["mode"] == "emulated" and "lab0 (driver veth)" in pause["note"], pause
    # the study's mechanics: node 2's queue crossed T1 and fell below T2, node 1 was held meanwhile
    assert pause["xoff"] >= 1 and pause["xon"] >= 1 and pause["paused_s"] > 0, pause
    assert pause["max_occupancy"] > 15, pause   # T1 = 15: XOFF fires above it
    # every XOFF and XON reached the agent on n1's host and changed its tbf there (plus μ1 at start and end)
    agent = pause["agent"]
    assert agent["applied"] >= pause["xoff"] + pause["xon"] + 1 and agent["signals"] >= agent["applied"], agent
    assert agent["foreign"] == 0, agent   # every datagram came from n2's link-B address
    assert pause["queues"]["node1"]["kind"] == "tbf" and pause["queues"]["node1"]["node"] == "n1", pause
    # both programs ran on the hosts over SSH, from the zip archived with the repetition
    started = [e for e in re.split(r"\n(?=\s+[\d.]+ +\S+ )", (run / "commands.log").read_text())
               if "pause_agent.pyz" in e and re.match(r"\s+[\d.]+ +& ssh ", e)]
    n1, n2 = bed.hosts["n1"].address, bed.hosts["n2"].address
    # once per attempt: a repetition the busy machine spoiled runs again, its programs started anew (CI 2026-12-06)
    attempts = 1 + sum(1 for r in summary.get("reruns", []) if "rerun" in r)
    assert [(f" {n1} --" in e, " obey " in e) for e in started] == [(True, True), (False, False)] * attempts, started
    assert f" {n2} --" in started[1]
    assert (run / "points/000/rep0/pause_agent.pyz").is_file()
    events = (run / "points/000/rep0/pause_events.csv").read_text().splitlines()
    assert any(",xoff," in e for e in events) and any(",xon," in e for e in events), events[:5]
    # and the hosts are as they were: no tbf left on n1, no address, no program, no staged file
    assert bed.state() == before
    assert agents(p.pid) == []
    assert not list(Path("/tmp").glob(f"ccrig-{p.pid}-*")), "staged files or control sockets left behind"


def test_interrupted_pause_run_restores_the_hosts(bed, ccrig, tmp_path):
    """Ctrl-C while the controller holds link B: the controller and n1's agent end, n1's tbf goes, the hosts
    are as they were."""
    before = bed.state()
    spec = pause_chain_spec("emulated")
    spec["duration"] = "60s"
    p = subprocess.Popen(ccrig.argv(ccrig.write(spec), "--inventory", str(bed.inventory)), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 60
    events = []
    while not any(",xoff," in e for e in events):
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.2)
        events = [x for f in (tmp_path / "runs").glob("*/points/000/rep0/pause_events.csv")
                  for x in f.read_text().splitlines()]
    assert len(agents(p.pid)) == 2   # n1's agent and n2's controller
    for host in ("n1", "n2"):   # each host's copy of the program, from the run's directory there
        assert Path(f"/tmp/ccrig-{p.pid}-{host}/pause_agent.pyz").is_file()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert bed.state() == before
    assert agents(p.pid) == []
    assert "tbf" not in bed.exec("n1", ["tc", "qdisc", "show"]).stdout
    assert not list(Path("/tmp").glob(f"ccrig-{p.pid}-*")), "staged files or control sockets left behind"


def test_missing_interface_is_named(bed, ccrig, tmp_path):
    inv = yaml.safe_load(bed.inventory.read_text())
    inv["all"]["children"]["routers"]["hosts"]["n2"]["ccrig_interfaces"]["n1"] = "ccrignope0"
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    before = bed.state()
    line = one_line_error(ccrig.run(pause_chain_spec("ethtool"), "--inventory", str(path)))
    assert "host n2" in line and "'ccrignope0' does not exist" in line, line
    assert bed.state() == before


def test_ethtool_runs_over_ssh_through_the_testbed(bed, tmp_path):
    """Ethtool.on(hosts testbed, node): every command goes over the host's SSH connection (in the run's log),
    reads the driver and link there, and an unsupported NIC is an error naming host, node, interface and driver,
    with nothing changed (no ethtool -A was run)."""
    from ccrig.topologies.named.pause_chain import PauseChainSpec
    spec = PauseChainSpec.model_validate(pause_chain_spec("ethtool")["topology"])
    topo = spec.build(flows=1)
    log = tmp_path / "commands.log"
    tb = HostsTestbed(topo, Commands(log), f"{bed.prefix}e", inventory=bed.inventory)
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
