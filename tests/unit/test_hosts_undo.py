"""The hosts testbed's undo list: one list of commands for down() and for each host's undo.sh (ccrig clean -i)."""
from ccrig.topologies.testbeds.hosts import UndoJournal


def test_undo_puts_back_what_up_recorded_newest_first():
    undo = UndoJournal()
    # a port mapped but never prepared (up() failed before it) is never recorded: not ours to touch
    undo.port("r1", "eth1", "198.18.1.1/24", {
        "mtu": 9000, "gso_max_segs": 65535, "gso_max_size": 65536, "gro_max_size": 65536, "up": False,
        "features": {"tcp-segmentation-offload": True, "generic-receive-offload": False}})
    undo.routes("r1", [("198.18.5.0/24", "198.18.1.2")])
    undo.forwarding("r1", "0")
    undo.remember("r1", ["ethtool", "-A", "eth1", "autoneg", "on", "rx", "off", "tx", "off"])
    undo.remember("r1", ["ethtool", "-A", "eth2", "autoneg", "on", "rx", "on", "tx", "on"])
    got = undo.commands("r1")
    assert got == [
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
    assert undo.commands("r1", remembered=False) == got[2:]
    assert undo.commands("s1") == []
