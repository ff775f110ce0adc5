"""PAUSE on the hosts testbed, over real SSH, on NICs that have the pause API: the guest's two e1000e NICs (on
a qemu hub: topologies/vm.E1000E_QEMU_OPTS) are moved into two SSH hosts built by tests/support/sshhosts.py
(network namespaces with their own sshd), where they are link B of a pause_chain: n1's lab0 to n2's lab0.

Everything the hosts testbed does goes over SSH; every check is made from the other side too, with ethtool run
directly in the host's namespace, so a testbed that only believes it set something fails. The NICs are
put back in the guest's root namespace under their own names afterwards.

Marked slow_guest: sshd logins under TCG make it take minutes, so `make test` leaves it to `make test-vm-slow`.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from ccrig.experiments import spec as specmod

from ccrig.experiments.run import pause_run

from ccrig.experiments.run import preflight
from ccrig.commands import Commands
from ccrig.experiments.telemetry.exporter import families
from ccrig.topologies.testbeds.hosts import HostsTestbed
from ccrig.topologies.pause.ethtool import Ethtool, NicPause, PauseParams

ROOT = Path(__file__).resolve().parents[3]
from support.sshhosts import Host, SshHosts, bed_prefix, pause_chain_spec

pytestmark = pytest.mark.slow_guest




def nic_state(bed: SshHosts, host: str) -> str:
    """The NIC's pause settings as the host's own namespace sees them (not over SSH)."""
    out = bed.exec(host, ["ethtool", "-a", "lab0"]).stdout
    return " ".join(ln.split(":")[1].strip() for ln in out.splitlines()
                    if ln.split(":")[0] in ("Autonegotiate", "RX", "TX"))


@pytest.fixture(scope="module")
def bed(commands):
    commands.run(["modprobe", "e1000e"], check=False)
    tool = Ethtool(commands)
    found = [d.name for d in sorted(Path("/sys/class/net").iterdir()) if tool.driver(d.name) == "e1000e"]
    if len(found) < 2:
        pytest.skip("the guest has no pair of e1000e NICs: the vm tier must boot it with "
                    "--qemu-opts=topologies.testbeds.vm.E1000E_QEMU_OPTS")
    nics = found[:2]
    # the hosts log in as the bed's sudo operator, as on a lab; should the guest's view of the host's file
    # system drop sudo's setuid bit, as root instead (whose login shell reads a slow ~/.bashrc: slower, same)
    probe = commands.run(["runuser", "-u", "nobody", "--", "sudo", "-n", "true"], check=False)
    user = "root" if "effective uid is not 0" in probe.stderr else "op"
    hosts = [Host("s1", ["senders"], node="s1", interfaces={"n1": "lab1"}, user=user),
             Host("n1", ["routers"], node="n1", interfaces={"s1": "lab1", "n2": "lab0"}, user=user),
             Host("n2", ["routers"], node="n2", interfaces={"n1": "lab0", "d1": "lab1"}, user=user),
             Host("d1", ["receivers"], node="d1", interfaces={"n2": "lab1"}, user=user)]
    cables = [("s1", "lab1", "n1", "lab1"), ("n2", "lab1", "d1", "lab1")]
    # virtme-ng's init bind-mounts a generated /etc/shadow (so that su works for any user), and useradd cannot
    # rename its new shadow file over a mount point: the bed's users need the overlay's own file meanwhile
    shadow = Path(f"/tmp/ccrig{os.getpid()}-shadow")
    bound = commands.ok(["mountpoint", "-q", "/etc/shadow"])
    if bound:
        shadow.write_bytes(Path("/etc/shadow").read_bytes())
        commands.run(["umount", "/etc/shadow"])
    try:
        b = SshHosts(hosts, cables, prefix=bed_prefix()).up()
    except BaseException:
        if bound:
            commands.run(["mount", "--bind", str(shadow), "/etc/shadow"])
        raise
    moved = []
    try:
        for host, dev in (("n1", nics[0]), ("n2", nics[1])):
            commands.run(["ip", "link", "set", dev, "netns", b.ns(host)])
            moved.append((host, dev))
            b.exec(host, ["ip", "link", "set", dev, "name", "lab0"])
            b.exec(host, ["ip", "link", "set", "lab0", "up"])
        wait_carrier(b)
        warm_up(b)
        yield b
    finally:
        for host, dev in moved:
            b.exec(host, ["ip", "link", "set", "lab0", "down"], check=False)
            b.exec(host, ["ip", "link", "set", "lab0", "name", dev], check=False)
            b.exec(host, ["ip", "link", "set", dev, "netns", "1"], check=False)
        b.down()
        if bound:
            commands.run(["mount", "--bind", str(shadow), "/etc/shadow"])


def warm_up(bed: SshHosts) -> None:
    """One login per host, one at a time, before the tests: under TCG the very first sshd session of a fresh
    guest (sshd, its keys and libraries read for the first time) takes longer than the hosts testbed's 15 s
    connection timeout when four start at once; later ones do not."""
    for h in bed.hosts.values():
        user = bed.operator if h.user == "op" else h.user
        subprocess.run(["ssh", "-i", str(bed.key), "-o", f"UserKnownHostsFile={bed.known_hosts}", "-o",
                        "BatchMode=yes", "-o", "ConnectTimeout=60", "-l", user, h.address, "true"],
                       capture_output=True, timeout=90)


def wait_carrier(bed: SshHosts, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all("LOWER_UP" in bed.exec(h, ["ip", "-o", "link", "show", "lab0"]).stdout for h in ("n1", "n2")):
            return
        time.sleep(0.2)
    pytest.fail("link B (the e1000e pair) has no carrier")


def test_ethtool_over_ssh_enables_verifies_and_restores(bed, tmp_path):
    spec = specmod.validate(pause_chain_spec("ethtool"), "test")
    topo = spec.topology.build(1)
    log = tmp_path / "commands.log"
    tb = HostsTestbed(topo, Commands(log), f"{bed.prefix}e", inventory=bed.inventory)
    try:
        assert tb.preflight() == []
        tool = Ethtool.on(tb, "n1")
        assert tool.driver("lab0") == "e1000e"
        login = bed.operator if bed.hosts["n1"].user == "op" else "root"
        assert tool.place == f"node n1 on host n1, {login}@{bed.hosts['n1'].address}:22"
        before, seen = tool.get("lab0"), nic_state(bed, "n1")
        assert seen == " ".join("on" if v else "off" for v in (before.autoneg, before.rx, before.tx))
        want = PauseParams(autoneg=False, rx=not before.rx, tx=not before.tx)
        with NicPause() as pause:
            got = pause.enable(tool, "lab0", want)
            assert (got.autoneg, got.rx, got.tx) == (False, want.rx, want.tx)
            # the host's own view agrees: the setting is really on that machine's NIC
            assert nic_state(bed, "n1") == " ".join(("off", *("on" if v else "off" for v in (want.rx, want.tx))))
            counters = tool.counters("lab0")
            assert {"driver_rx_pause", "driver_tx_pause", "driver_rx_xoff", "driver_tx_xon"} <= set(counters)
        assert nic_state(bed, "n1") == seen
        text = log.read_text()
        assert "ssh " in text and "ethtool -A lab0" in text
    finally:
        tb.down()


def test_pause_run_on_hosts_sets_link_b_exports_counters_and_restores(bed, tmp_path, monkeypatch):
    """auto on two NICs with flow control is ethtool: preflight passes over SSH, start() sets n1 to honour
    PAUSE and n2 to send it, the samples carry both NICs' counters, summary() their deltas, stop() undoes it."""
    raw = pause_chain_spec("auto")
    exp = specmod.validate(raw, "test")
    before = {h: nic_state(bed, h) for h in ("n1", "n2")}
    commands = Commands(tmp_path / "commands.log")
    monkeypatch.setenv("CCRIG_INVENTORY", str(bed.inventory))
    # the whole preflight: here, and over SSH each host (tools, its kernel's qdiscs) and link B's NICs
    problems = [n for n in preflight.needs(specmod.points(raw, exp, "test"), commands, f"{bed.prefix}p")
                if not n.ok]
    assert problems == []
    topo = exp.topology.build(exp.n_flows)
    tb = HostsTestbed(topo, commands, f"{bed.prefix}r", inventory=bed.inventory)
    run = None
    try:
        tb.up()
        run = pause_run.PauseRun.of(exp, topo, tb, commands, tmp_path)  # as the runner: after up()
        run.start()
        assert (run.plan.mode, run.plan.note, run.plan.actuator) == ("ethtool", None, None)
        assert nic_state(bed, "n1") == "off on off"   # node 1 honours PAUSE
        assert nic_state(bed, "n2") == "off off on"   # node 2 sends it
        # should this process die now, `ccrig clean -i` finds how to put each NIC back in the host's undo.sh
        for h in ("n1", "n2"):
            undo = Path(f"/tmp/{bed.prefix}r-{h}/undo.sh").read_text()
            autoneg, rx, tx = before[h].split()
            assert f"ethtool -A lab0 autoneg {autoneg} rx {rx} tx {tx}" in undo, undo
        # link B carries the chain's traffic once the NICs renegotiated
        ping = tb.run("s1", ["ping", "-c", "3", "-i", "0.3", "-W", "2", tb.address("d1")], check=False).stdout
        assert int(re.search(r"(\d+) received", ping).group(1)) > 0, ping
        labels = {"experiment": "x", "run": "r", "point": "0", "rep": "0", "qdisc": "pfifo", **run.labels()}
        samples = run.samples(labels, time.time())
        frames = {(s.labels["node"], s.labels["direction"]): s.labels["source"] for s in samples
                  if s.name == "pause_nic_frames_total"}
        # e1000e counts PAUSE in its own ethtool -S counters (no ethtool -I -a statistics on this kernel)
        assert set(frames) == {(n, d) for n in ("n1", "n2") for d in ("rx", "tx")}, frames
        assert set(frames.values()) <= {"standard", "driver"}
        enabled = {(s.labels["node"], s.labels["setting"]): s.value for s in samples if s.name == "pause_nic_enabled"}
        assert enabled[("n1", "rx")] == 1 and enabled[("n1", "tx")] == 0 and enabled[("n2", "tx")] == 1
        assert all("qdisc" not in s.labels and s.labels["dev"] == "lab0" for s in samples)
        names = {f.name for f in families(samples)}
        assert {"ccrig_pause_nic_frames", "ccrig_pause_nic_enabled"} <= names
        summary = run.summary()
        json.dumps(summary)
        for node in ("n1", "n2"):
            nic = summary["nics"][node]
            assert nic["driver"] == "e1000e" and nic["dev"] == "lab0" and f"host {node}" in nic["where"]
            assert set(nic["counters"]) == set(nic["counters_start"]) and all(v >= 0 for v in nic["counters"].values())
        assert summary["nics"]["n1"]["set"] == {"autoneg": False, "rx": True, "tx": False}
    finally:
        problems = run.stop() if run is not None else []
        tb.down()
    assert problems == []
    assert {h: nic_state(bed, h) for h in ("n1", "n2")} == before
