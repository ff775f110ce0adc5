"""The guest kernel has what the vm tier is for: the queue disciplines, Open vSwitch and congestion controls this
machine's kernel lacks, and netem's delay shows up in a real ping between two namespaces."""
from __future__ import annotations

import re
from pathlib import Path


# red has no defaults for its thresholds (tc-red(8)); the others install with the kernel's defaults
PARAMS = {"red": ["limit", "60000", "min", "10000", "max", "30000", "avpkt", "1000", "burst", "20",
                  "bandwidth", "10mbit"]}


def test_qdisc_installs(qdisc_kind, tier_modules, ns_pair_shared, commands):
    """The kernel accepts the discipline as a real root qdisc and reports it back."""
    ns = ns_pair_shared.a
    commands.run(["tc", "qdisc", "replace", "dev", "va", "root", qdisc_kind, *PARAMS.get(qdisc_kind, [])], ns=ns)
    shown = commands.run(["tc", "qdisc", "show", "dev", "va"], ns=ns).stdout
    assert re.search(rf"^qdisc {qdisc_kind} ", shown, re.M), shown


def test_openvswitch_datapath(tier_modules, commands):
    """The kernel datapath registers its generic netlink family once the module is loaded."""
    assert Path("/sys/module/openvswitch").is_dir()
    # `genl ctrl list` (iproute2) lists the generic netlink families the kernel knows
    assert "ovs_datapath" in commands.run(["genl", "ctrl", "list"]).stdout


def test_vegas_available(tier_modules):
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    assert "vegas" in available, available


def test_netem_delay_measured_by_ping(tier_modules, ns_pair, commands):
    """40 ms of netem delay each way (80 ms round trip): no echo comes back sooner, and the fastest comes back
    within a margin that holds on an emulated CPU (a ping's own cost is well under a millisecond there)."""
    for ns, dev in ((ns_pair.a, "va"), (ns_pair.b, "vb")):
        commands.run(["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "40ms"], ns=ns)
    out = commands.run(["ping", "-c", "5", "-i", "0.2", "-W", "5", ns_pair.addr_b], ns=ns_pair.a, timeout=30).stdout
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) == 5, out
    assert min(rtts) >= 80.0, out
    assert min(rtts) < 80.0 + 20.0, out


def test_python_trees_are_read_from_their_images():
    """The venv, the standard library and the site folders are the ext4 images the host attached (images.py), not
    9p: each is an ext4 mount of its own in the guest's mount table."""
    from ccrig.topologies.testbeds.vm import images
    mounts = {line.split()[1]: line.split()[2] for line in Path("/proc/mounts").read_text().splitlines()}
    trees = images.trees()
    assert trees
    assert {str(t): mounts.get(str(t)) for t in trees} == {str(t): "ext4" for t in trees}
