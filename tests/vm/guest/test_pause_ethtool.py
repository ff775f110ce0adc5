"""The ethtool path against a driver that implements the pause API: e1000e, emulated by qemu.

The vm tier gives the guest two e1000e NICs joined by a qemu hub (nothing else on it):
    vng --qemu-opts='-netdev hubport,id=ccp1,hubid=7 -device e1000e,netdev=ccp1
                     -netdev hubport,id=ccp2,hubid=7 -device e1000e,netdev=ccp2'
(the harness, topologies/testbeds/vm/, must pass these). qemu's e1000e model hands PAUSE frames to the stack and
counts none in its flow-control registers; real e1000e hardware consumes and counts them. The NICs stay in
the guest's root namespace and are put back as found.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from ccrig.topologies.pause.ethtool import Ethtool, NicPause, PauseParams
from ccrig.topologies.pause.agent.frames import ETH_P_MAC_CONTROL, FrameSender, decode


def e1000e_nics() -> list[str]:
    out = []
    for dev in sorted(Path("/sys/class/net").iterdir()):
        driver = dev / "device" / "driver"
        if driver.exists() and os.path.basename(os.path.realpath(driver)) == "e1000e":
            out.append(dev.name)
    return out


def wait_carrier(devs, timeout: float = 20) -> None:
    """Until both ends have carrier: the emulated e1000e renegotiates (link down for seconds under TCG) when
    its pause settings change, and frames sent meanwhile are lost."""
    deadline = time.time() + timeout
    while time.time() < deadline and not all(Path(f"/sys/class/net/{d}/carrier").read_text().strip() == "1"
                                              for d in devs):
        time.sleep(0.2)


@pytest.fixture(scope="module")
def nics(commands):
    commands.run(["modprobe", "e1000e"], check=False)
    found = e1000e_nics()
    if len(found) < 2:
        pytest.skip("the guest has no pair of e1000e NICs: the vm tier must boot it with "
                    "--qemu-opts='-netdev hubport,id=ccp1,hubid=7 -device e1000e,netdev=ccp1 "
                    "-netdev hubport,id=ccp2,hubid=7 -device e1000e,netdev=ccp2'")
    for dev in found[:2]:
        commands.run(["ip", "link", "set", dev, "up"])
    wait_carrier(found[:2])
    yield found[:2]
    for dev in found[:2]:
        commands.ok(["ip", "link", "set", dev, "down"])


def test_enable_verify_restore(nics, commands):
    tool = Ethtool(commands)
    dev = nics[0]
    assert tool.driver(dev) == "e1000e"
    before = tool.get(dev)
    want = PauseParams(autoneg=False, rx=not before.rx, tx=not before.tx)
    with NicPause(commands) as pause:
        got = pause.enable(None, dev, want)
        assert (got.rx, got.tx, got.autoneg) == (want.rx, want.tx, False)
        assert tool.get(dev) == got
    # the run is over: exactly what was there before
    assert tool.get(dev) == before


def test_driver_counters_are_read_and_normalised(nics, commands):
    counters = Ethtool(commands).counters(nics[1])
    # e1000e reports its pause counters through ethtool -S (not ethtool -I -a on this kernel)
    assert {"driver_rx_xon", "driver_rx_xoff", "driver_tx_xon", "driver_tx_xoff",
            "driver_rx_pause", "driver_tx_pause"} <= set(counters)
    assert all(isinstance(v, int) and v >= 0 for v in counters.values())


def test_pause_frames_from_one_nic_to_the_other(nics, commands):
    """Real frames on an emulated wire: sent by one e1000e, seen by the other (as delivered frames or in its
    pause counters, whichever qemu's model does)."""
    tx, rx = nics
    tool = Ethtool(commands)
    with NicPause(commands) as pause:
        pause.enable(None, rx, PauseParams(autoneg=False, rx=True, tx=True))
        time.sleep(0.5)  # the renegotiation starts a moment after the settings change
        wait_carrier(nics)
        before = tool.counters(rx)
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_MAC_CONTROL))
        raw.bind((rx, ETH_P_MAC_CONTROL))
        raw.settimeout(5)
        sender = FrameSender(tx)
        for quanta in (100, 200, 0):
            sender.send(quanta)
        sender.close()
        seen = []
        try:
            while len(seen) < 3:
                f = decode(raw.recv(2048))
                if f is not None:
                    seen.append(f.quanta)
        except socket.timeout:
            pass
        raw.close()
        time.sleep(0.5)
        after = tool.counters(rx)
    counted = after.get("driver_rx_pause", 0) - before.get("driver_rx_pause", 0)
    print(f"delivered to the stack: {seen}; counted by the NIC: {counted}; counters {before} -> {after}")
    assert seen == [100, 200, 0] or counted >= 3
