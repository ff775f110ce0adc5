"""The hosts testbed's undo list: one list of commands for down() and for each host's undo.sh (ccrig clean -i)."""
from pathlib import Path

from ccrig.commands import Commands
from ccrig.topologies.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.hosts import HostsTestbed, _Port


def test_undo_puts_back_what_up_recorded_newest_first():
    topo = DumbbellSpec.model_validate({"bottleneck": {"rate": "10mbit", "buffer": "50pkt"}}).build(1)
    tb = HostsTestbed(topo, Commands(), "ccrigu", Path("/nonexistent/inventory.yml"))
    x = next(i for i in topo.interfaces()["r1"] if i.peer == "r2")
    never = _Port("r1", "eth9", x, "198.18.9.1", 24)   # mapped but never prepared: not ours to touch
    port = _Port("r1", "eth1", x, "198.18.1.1", 24, saved={
        "mtu": 9000, "gso_max_segs": 65535, "gso_max_size": 65536, "gro_max_size": 65536, "up": False,
        "features": {"tcp-segmentation-offload": True, "generic-receive-offload": False}})
    tb.ports = {"r1": [port, never]}
    tb._routes = {"r1": [["ip", "route", "del", "198.18.5.0/24", "via", "198.18.1.2"]]}
    tb._forwarding = {"r1": "0"}
    tb._remembered = {"r1": [["ethtool", "-A", "eth1", "autoneg", "on", "rx", "off", "tx", "off"],
                             ["ethtool", "-A", "eth2", "autoneg", "on", "rx", "on", "tx", "on"]]}
    undo = tb._undo_argv("r1")
    assert undo == [
        ["ethtool", "-A", "eth2", "autoneg", "on", "rx", "on", "tx", "on"],
        ["ethtool", "-A", "eth1", "autoneg", "on", "rx", "off", "tx", "off"],
        ["ip", "route", "del", "198.18.5.0/24", "via", "198.18.1.2"],
        ["tc", "qdisc", "del", "dev", "eth1", "root"],
        ["ip", "addr", "del", "198.18.1.1/24", "dev", "eth1"],
        ["ip", "link", "set", "dev", "eth1", "gso_max_segs", "65535", "gso_max_size", "65536", "gro_max_size",
         "65536", "mtu", "9000"],
        ["ethtool", "-K", "eth1", "tso", "on", "gro", "off"],
        ["ip", "link", "set", "dev", "eth1", "down"],
        ["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"]]
    # down() leaves the remembered ones to their owners (PauseRun restores its NICs itself)
    assert tb._undo_argv("r1", remembered=False) == undo[2:]
    assert tb._undo_argv("s1") == []
