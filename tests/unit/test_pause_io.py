"""The pure parts of the PAUSE I/O modules: frame encoding and decoding, driver counter names."""
import re

import pytest

from ccrig.topologies.pause.ethtool import normalise_counters, parse_stats_text
from ccrig.topologies.pause.agent.frames import decode, pause_frame
from support.exposition import render


def test_frame_layout():
    f = pause_frame("02:00:00:00:00:01", 0x1234)
    assert len(f) == 60
    assert f[:6] == bytes.fromhex("0180c2000001") and f[6:12] == bytes.fromhex("020000000001")
    assert f[12:14] == b"\x88\x08" and f[14:16] == b"\x00\x01" and f[16:18] == b"\x12\x34"
    assert f[18:] == b"\0" * 42
    d = decode(f)
    assert (d.dst, d.src, d.ethertype, d.opcode, d.quanta) == ("01:80:c2:00:00:01", "02:00:00:00:00:01",
                                                               0x8808, 1, 0x1234)
    assert decode(pause_frame("02:00:00:00:00:01", 0)).quanta == 0


@pytest.mark.parametrize("quanta", [-1, 65536])
def test_frame_quanta_range(quanta):
    with pytest.raises(ValueError):
        pause_frame("02:00:00:00:00:01", quanta)


def test_decode_ignores_other_frames():
    ipv4 = bytes(12) + b"\x08\x00" + bytes(46)
    assert decode(ipv4) is None
    other_opcode = bytearray(pause_frame("02:00:00:00:00:01", 5))
    other_opcode[15] = 0x02   # PFC (802.1Qbb) uses opcode 0x0101; anything but 1 is not PAUSE
    assert decode(bytes(other_opcode)) is None
    assert decode(b"short") is None


def test_parse_stats_text():
    text = "NIC statistics:\n     rx_packets: 12\n     rx_flow_control_xoff: 3\n     odd line\n"
    assert parse_stats_text(text) == {"rx_packets": 12, "rx_flow_control_xoff": 3}


def test_driver_counters_normalised():
    # veth's -S counters (peer_ifindex, xdp...) mean nothing for PAUSE; e1000e's do
    assert normalise_counters("veth", {"peer_ifindex": 2, "rx_queue_0_drops": 0}) == {}
    e1000e = {"rx_flow_control_xon": 1, "rx_flow_control_xoff": 4, "tx_flow_control_xon": 0,
              "tx_flow_control_xoff": 2, "rx_packets": 99}
    assert normalise_counters("e1000e", e1000e) == {"rx_xon": 1, "rx_xoff": 4, "tx_xon": 0, "tx_xoff": 2,
                                                    "rx_pause": 5, "tx_pause": 2}
    assert normalise_counters("mlx5_core", {"rx_pause_ctrl_phy": 3, "tx_pause_ctrl_phy": 1}) == \
        {"rx_pause": 3, "tx_pause": 1}
    assert normalise_counters("i40e", {"port.link_xoff_rx": 7}) == {"rx_xoff": 7, "rx_pause": 7}


def test_prometheus_samples_pass_promtool_names():
    from ccrig.experiments.telemetry.exporter import HELP
    from ccrig.topologies.pause.emulated import PAUSE_HELP, PauseStats, prometheus_samples

    stats = PauseStats(xoff=3, xon=2, paused_s=1.5, paused=True, latency_s=[2e-4, 3e-4, 1e-3])
    samples = prometheus_samples(stats, {"experiment": "e", "run": "r", "point": "0"})
    assert {s.name for s in samples} == set(PAUSE_HELP)
    merged = {**HELP, **PAUSE_HELP}
    assert all(n.endswith("_total") == (merged[n][0] == "counter") for n in PAUSE_HELP)
    quant = {s.labels["stat"]: s.value for s in samples if s.name == "pause_reaction_seconds"}
    assert quant == {"p50": 3e-4, "p90": 1e-3, "p99": 1e-3, "max": 1e-3}
    text = render(samples)
    assert re.search(r"^# TYPE ccrig_pause_xoff(_total)? counter$", text, re.M)
    assert re.search(r"^# TYPE ccrig_pause_reaction_seconds gauge$", text, re.M)
    assert 'ccrig_pause_reaction_seconds{experiment="e",point="0",run="r",stat="p50"} 0.0003' in text


def test_agent_zip_is_reproducible_and_runs_without_ccrig(tmp_path):
    """The program the hosts run: the same bytes every time, and it starts under an interpreter that sees
    neither this checkout nor its virtualenv (-I -S), answering a bad interface with its one-line error."""
    import json
    import subprocess
    from dataclasses import asdict

    from ccrig.topologies.pause.agent.config import EmulatedPauseConfig
    from ccrig.topologies.pause.emulated import agent_zip
    a, b = agent_zip(tmp_path / "a.pyz"), agent_zip(tmp_path / "b.pyz")
    assert a.read_bytes() == b.read_bytes()
    cfg = EmulatedPauseConfig(down_dev="lab1", up_dev="ccrignope0", high=5, low=3, rate_bps=1e6, paused_bps=0,
                              up_limit=10, down_limit=20, departure_pps=100, signal_to="127.0.0.1")
    p = subprocess.run(["python3", "-I", "-S", str(a), "obey", json.dumps(asdict(cfg))], cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and json.loads(p.stdout) == {"error": "[Errno 19] no interface 'ccrignope0'"}, p


def test_rate_signal_numbers_and_repeats(tmp_path):
    """What the controller sends node 1's agent: "SEQ BPS", a new number per rate, the rate in force repeated."""
    import socket

    from ccrig.topologies.pause.agent.rate_signal import RESEND_EVERY, RateSignal
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as agent:
        agent.bind(("127.0.0.1", 0))
        agent.settimeout(5)
        sig = RateSignal("127.0.0.1", agent.getsockname()[1])
        sig.repeat(0.0)                       # nothing to repeat before the first rate
        sig.send(1e6)
        sig.send(0)
        sig.repeat(sig.sent_at + RESEND_EVERY / 2)
        sig.repeat(sig.sent_at + 1.5 * RESEND_EVERY)
        assert [agent.recv(64) for _ in range(3)] == [b"1 1000000", b"2 0", b"2 0"]
        agent.setblocking(False)
        with pytest.raises(BlockingIOError):
            agent.recv(64)
