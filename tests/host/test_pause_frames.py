"""Real 802.3x PAUSE frames: sent on one end of a veth pair, captured on the peer (tcpdump and AF_PACKET)."""
import os
import socket
import struct
import subprocess
import time

import pytest

from conftest import veth_namespace
from ccrig.commands import Commands
from ccrig.topologies.pause.agent.controller import Frame
from ccrig.topologies.pause.agent.frames import ETH_P_ALL, FrameActuator, decode, interface_mac
from ccrig.topologies.pause.agent.rtnl import in_namespace
from support import wait


@pytest.fixture
def veth():
    ns = f"ccF-fr-{os.getpid()}"
    with veth_namespace(ns, "ccFtx", "ccFrx", up=True) as c:
        yield ns, c


def read_pcap(path):
    """Frames in a classic pcap file (what tcpdump -w writes)."""
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data)[0]
    order = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off, frames = 24, []
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack_from(order + "IIII", data, off)
        frames.append(data[off + 16: off + 16 + caplen])
        off += 16 + caplen
    return frames


def test_frames_captured_on_the_peer(veth, tmp_path):
    ns, c = veth
    pcap = tmp_path / "pause.pcap"
    dump = c.popen(["tcpdump", "-i", "ccFrx", "--immediate-mode", "-U", "-n", "-w", str(pcap), "ether proto 0x8808"], ns=ns,
                   stderr=subprocess.PIPE)
    try:
        with in_namespace(ns):
            raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            raw.bind(("ccFrx", ETH_P_ALL))
            raw.settimeout(5)
            act = FrameActuator("ccFtx")
            tx_mac = interface_mac("ccFtx")
        # tcpdump is listening once it says so on stderr
        deadline = time.time() + 10
        line = b""
        while b"listening" not in line and time.time() < deadline:
            line = dump.stderr.readline()
        for frame in (Frame(1000), Frame(1000, refresh=True), Frame(0)):
            act(frame)
        act(None)  # no decision, no frame
        got = []
        while len(got) < 3:
            pkt = decode(raw.recv(2048))
            if pkt is not None:
                got.append(pkt)
        raw.close()
        act.close()
        assert [p.quanta for p in got] == [1000, 1000, 0]
        for p in got:
            assert (p.dst, p.ethertype, p.opcode, p.src) == ("01:80:c2:00:00:01", 0x8808, 1, tx_mac)
        time.sleep(0.3)
    finally:
        dump.terminate()
        err = dump.communicate(timeout=5)[1]
    frames = [decode(f) for f in read_pcap(pcap)]
    assert frames, err
    assert [f.quanta for f in frames] == [1000, 1000, 0]
    assert all(f.dst == "01:80:c2:00:00:01" and f.src == tx_mac for f in frames)
    # tcpdump's own decoder agrees it is MAC Control PAUSE
    text = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-e", "-v"], capture_output=True, text=True).stdout
    assert text.count("ethertype MPCP (0x8808)") == 3 and text.count("Opcode Pause") == 3, text


def test_controller_sends_xoff_refresh_xon_frames(tmp_path):
    """The controller in frames mode on a real chain: node 2 sends PAUSE frames to node 1 as its queue crosses
    the thresholds (veth does not honour them, so node 2 stays congested and the XOFF is refreshed)."""
    import threading

    from ccrig.topologies.testbeds.netns import NetnsTestbed
    from ccrig.topologies.pause import chain_controller
    from ccrig.topologies.named.pause_chain import PauseChainSpec

    spec = PauseChainSpec.model_validate({
        "name": "pause_chain", "scale": 10, "link_a": {"rate": "60pps"},
        "link_b": {"rate": "100pps", "buffer": "10pkt"}, "link_c": {"rate": "15pps", "buffer": "20pkt"},
        "pause": {"high": 12, "low": 8, "quanta": 1000, "mode": "frames"}})
    topo = spec.build(flows=4)
    bed = NetnsTestbed(topo, Commands(tmp_path / "commands.log"), prefix=f"ccF-pf{os.getpid()}")
    try:
        bed.up()
        with in_namespace(bed.ns("n1")):
            raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x8808))
            raw.bind((bed.egress_device("n1", "n2"), 0x8808))
        raw.settimeout(0.5)
        got, stop = [], threading.Event()

        def capture():
            while not stop.is_set():
                try:
                    f = decode(raw.recv(2048))
                except socket.timeout:
                    continue
                if f is not None:
                    got.append(f)
        reader = threading.Thread(target=capture)
        reader.start()
        ctl = chain_controller(spec, topo, bed, bed.commands, actuator="frames")
        ctl.start()
        s, d = topo.pairs[0]
        server = bed.popen(d, ["iperf3", "-s", "-1", "-p", "5397"])
        try:
            wait.listening(lambda argv: bed.run(d, argv, check=False), 5397)
            bed.run(s, ["iperf3", "-c", bed.address(d), "-p", "5397", "-t", "3", "-P", "4", "-C", "reno"], timeout=40)
        finally:
            server.kill()
            server.wait()
            stats = ctl.stop()
            time.sleep(0.3)
            stop.set()
            reader.join()
            raw.close()
    finally:
        bed.down()
    quanta = [f.quanta for f in got]
    assert stats.xoff >= 1 and stats.refreshes >= 1
    # every decision went on the wire, plus the XON stop() sends so node 1 is never left paused
    assert len(got) == stats.xoff + stats.refreshes + stats.xon + 1
    assert quanta.count(1000) == stats.xoff + stats.refreshes
    assert quanta.count(0) == stats.xon + 1 and quanta[-1] == 0
    assert quanta[0] == 1000
    assert all(f.dst == "01:80:c2:00:00:01" and f.opcode == 1 for f in got)
    # the controller measured each frame it sent
    assert len(stats.latency_s) == len(got) - 1
