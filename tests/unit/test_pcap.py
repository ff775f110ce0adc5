"""The pcap reader and the queue monitor's per-interval arithmetic, on files and events made here."""
import os
import struct

import numpy as np
import pytest

from ccrig.analysis import pcap
from ccrig.qdiscs import sojourn
from ccrig.tail import Tail

A, B = bytes([198, 18, 1, 1]), bytes([198, 18, 2, 2])


def _segment(src, dst, sport, dport, seq, ack, payload, flags=pcap.ACK, sack=()):
    opts = b""
    if sack:
        opts = bytes([1, 1, 5, 2 + 8 * len(sack)]) + b"".join(struct.pack("!II", l, r) for l, r in sack)
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq, ack, ((20 + len(opts)) // 4) << 12 | flags, 65535, 0, 0) + opts
    total = 20 + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0, src, dst)
    eth = b"\x00" * 12 + struct.pack("!H", pcap.ETH_IPV4)
    return eth + ip + tcp + b"x" * payload


def _write(path, packets, snaplen=128, nano=False, cut=False):
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, 1)
    for t, frame in packets:
        data = frame[:snaplen]
        frac = round((t % 1) * (1e9 if nano else 1e6))
        out += struct.pack("<IIII", int(t), frac, len(data), len(frame)) + data
    if cut:
        out = out[:-10]
    path.write_bytes(out)


def test_segments_carry_the_whole_payload_length_beyond_the_snap_length(tmp_path):
    f = tmp_path / "a.pcap"
    _write(f, [(1.5, _segment(A, B, 40001, 5201, 1000, 1, 1448)), (1.75, _segment(B, A, 5201, 40001, 1, 2448, 0))])
    segs = list(pcap.tcp_segments(f))
    assert [s.payload for s in segs] == [1448, 0]
    assert segs[0].src == "198.18.1.1" and segs[0].dport == 5201 and segs[0].t == pytest.approx(1.5)
    assert pcap.count(f) == 2
    assert pcap.data_packets(f) == {("198.18.1.1", 40001, "198.18.2.2", 5201): 1}


def test_nanosecond_files_and_a_record_cut_short(tmp_path):
    f = tmp_path / "n.pcap"
    _write(f, [(2.000000123, _segment(A, B, 1, 2, 0, 0, 10)), (3.0, _segment(A, B, 1, 2, 10, 0, 10))], nano=True,
           cut=True)
    segs = list(pcap.tcp_segments(f))
    assert len(segs) == 1 and segs[0].t == pytest.approx(2.000000123, abs=1e-9)


def test_not_a_pcap_is_said(tmp_path):
    f = tmp_path / "x.pcap"
    f.write_bytes(b"hello, this is not a capture at all")
    with pytest.raises(pcap.PcapError, match="not a pcap"):
        pcap.count(f)


def test_time_sequence_marks_retransmissions_and_sack_blocks(tmp_path):
    base = 5000
    pk = [(1.0 + i * 0.01, _segment(A, B, 40001, 5201, base + i * 100, 1, 100)) for i in range(5)]
    pk.append((1.1, _segment(B, A, 5201, 40001, 1, base + 100, 0, sack=((base + 200, base + 500),))))
    pk.append((1.2, _segment(A, B, 40001, 5201, base + 100, 1, 100)))   # the lost one, again
    pk.append((1.3, _segment(B, A, 5201, 40001, 1, base + 500, 0)))
    f = tmp_path / "ts.pcap"
    _write(f, pk)
    [ts] = pcap.time_sequences(f)
    assert ts.flow == ("198.18.1.1", 40001, "198.18.2.2", 5201)
    assert [(a, b) for _, a, b in ts.data] == [(i * 100, i * 100 + 100) for i in range(5)]
    assert [(t, a, b) for t, a, b in ts.retransmits] == [(pytest.approx(1.2), 100, 200)]
    assert [a for _, a in ts.acks] == [100, 500]
    assert [(a, b) for _, a, b in ts.sacks] == [(200, 500)]


def _events(rows):
    e = np.zeros(len(rows), dtype=sojourn.EVENT)
    for i, (t, kind, qlen, backlog, soj) in enumerate(rows):
        e[i] = (int(t * 1e9), int(soj * 1e9), 0, kind, qlen, backlog)
    return e


def test_occupancy_is_time_averaged_and_sojourns_are_the_dequeued_packets():
    m = sojourn.QueueMonitor.__new__(sojourn.QueueMonitor)
    m.state, m.totals = [(None, 0, 0)], {"events": 0, "sojourns": 0}
    # [0, 1] s: one packet in for 0.25 s, then two for 0.5 s, then one, sojourns 0.5 s and 0.6 s
    e = _events([(0.25, 0, 1, 1500, 0), (0.5, 0, 2, 3000, 0), (0.75, 1, 1, 1500, 0.5), (1.0, 1, 0, 0, 0.5)])
    s = m._summary(0, e, 0.0, 1e9)
    assert s["occupancy_mean_packets"] == pytest.approx(0.25 * 1 + 0.25 * 2 + 0.25 * 1)
    assert s["occupancy_max_packets"] == 2 and s["occupancy_max_bytes"] == 3000
    assert s["enqueued"] == 2 and s["dequeued"] == 2 and s["sojourn_mean_s"] == pytest.approx(0.5)
    # the next interval starts from the state the last one ended in: empty, no events -> all zero, no sojourn
    s2 = m._summary(0, _events([]), 1e9, 2e9)
    assert s2["occupancy_mean_packets"] == 0 and s2["sojourn_p99_s"] is None
    # a queue that stays at 3 packets through an interval without events is 3 on average
    m.state = [(0, 3, 4500)]
    assert m._summary(0, _events([]), 2e9, 3e9)["occupancy_mean_packets"] == pytest.approx(3)


def test_an_interval_takes_the_events_stamped_in_it_however_late_they_are_read(tmp_path):
    """The monitor's file holds events of this interval, one of the next and its drain mark: the next one's event
    waits for its own interval instead of being counted where it was read."""
    m = sojourn.QueueMonitor(None, [sojourn.Watched("r1", "eth0", 1, 2)], tmp_path)
    mark = np.zeros(1, dtype=sojourn.EVENT)
    mark[0] = (int(1.3e9), 0, sojourn.MARK_SLOT, sojourn.MARK, 0, 0)
    ev = np.concatenate([_events([(0.25, 0, 1, 1500, 0), (0.75, 1, 0, 0, 0.5), (1.2, 0, 1, 1500, 0)]), mark])
    m.events_path.write_bytes(ev.tobytes())
    m.tail = Tail(os.open(m.events_path, os.O_RDONLY), sojourn.EVENT.itemsize)   # as start() follows the file
    first = m.interval(0.0, 1.0)["r1:eth0"]
    assert first["enqueued"] == 1 and first["dequeued"] == 1 and m.drained_ns == int(1.3e9)
    assert first["occupancy_mean_packets"] == pytest.approx(0.5)
    second = m.interval(1.0, 2.0)["r1:eth0"]
    assert second["enqueued"] == 1 and second["dequeued"] == 0
    assert second["occupancy_mean_packets"] == pytest.approx(0.8)
    assert m.totals["events"] == 3
    os.close(m.tail.fd)
