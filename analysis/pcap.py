"""Classic pcap files as tcpdump -w writes them: records, and the IPv4/TCP headers in them (pure functions).

Only what the report and the checks need: per packet its time, addresses, ports, sequence and ACK numbers, flags,
payload length (from the IP header, so a capture cut at the snap length still counts the whole payload) and SACK
blocks. Ethernet (link type 1) and Linux cooked captures (113, `-i any`); IPv4 only, as the topologies are.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
         b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
LINK_HEADER = {1: 14, 113: 16}
ETH_IPV4 = 0x0800
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


class PcapError(ValueError):
    pass


def records(path: Path) -> Iterator[tuple[float, int, bytes]]:
    """(time in seconds, link type, captured bytes) of each record; a record cut short (a capture stopped
    mid-write) ends the file."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        if head[:4] not in MAGIC:
            raise PcapError(f"{path}: not a pcap file (magic {head[:4].hex()})")
        order, unit = MAGIC[head[:4]]
        linktype = struct.unpack(order + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(order + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _ = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec + frac * unit, linktype, data


def count(path: Path) -> int:
    return sum(1 for _ in records(path))


@dataclass(frozen=True)
class Segment:
    t: float
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int
    sack: tuple[tuple[int, int], ...] = field(default=())


def _ip(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def tcp_segments(path: Path) -> Iterator[Segment]:
    """Every IPv4 TCP segment in the capture."""
    for t, linktype, data in records(path):
        off = LINK_HEADER.get(linktype)
        if off is None or len(data) < off + 20:
            continue
        proto = struct.unpack("!H", data[off - 2:off])[0]
        if proto != ETH_IPV4:
            continue
        ip = data[off:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[0] >> 4 != 4 or ip[9] != 6 or len(ip) < ihl + 20:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:]
        sport, dport, seq, ack, off_flags = struct.unpack("!HHIIH", tcp[:14])
        doff = (off_flags >> 12) * 4
        yield Segment(t, _ip(ip[12:16]), _ip(ip[16:20]), sport, dport, seq, ack, off_flags & 0x3F,
                      max(0, total - ihl - doff), _sack(tcp[20:doff]))


def _sack(options: bytes) -> tuple[tuple[int, int], ...]:
    i, out = 0, []
    while i < len(options):
        kind = options[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options):
            break
        size = options[i + 1]
        if size < 2:
            break
        if kind == 5:
            body = options[i + 2:i + size]
            out += [struct.unpack("!II", body[j:j + 8]) for j in range(0, len(body) - 7, 8)]
        i += size
    return tuple(out)


@dataclass
class TimeSequence:
    """One flow's time-sequence graph: data segments sent (relative sequence numbers, retransmissions apart), the
    ACKs coming back and their SACK blocks — what tcptrace draws."""
    flow: tuple[str, int, str, int]
    data: list[tuple[float, int, int]] = field(default_factory=list)          # (t, start, end) first sends
    retransmits: list[tuple[float, int, int]] = field(default_factory=list)   # (t, start, end)
    acks: list[tuple[float, int]] = field(default_factory=list)               # (t, cumulative ACK)
    sacks: list[tuple[float, int, int]] = field(default_factory=list)         # (t, left, right)


def time_sequences(path: Path) -> list[TimeSequence]:
    """A time-sequence graph for every flow that carried data in the capture, sequence numbers relative to the
    flow's first. A data segment that starts below the highest end sent before it is a retransmission."""
    flows: dict[tuple, TimeSequence] = {}
    base: dict[tuple, int] = {}
    high: dict[tuple, int] = {}
    acks: list[Segment] = []
    for s in tcp_segments(path):
        key = (s.src, s.sport, s.dst, s.dport)
        if s.payload == 0:
            acks.append(s)
            continue
        if key not in flows:
            flows[key] = TimeSequence(key)
            base[key] = s.seq
            high[key] = 0
        start = (s.seq - base[key]) % 2**32
        end = start + s.payload
        if start < high[key]:
            flows[key].retransmits.append((s.t, start, end))
        else:
            flows[key].data.append((s.t, start, end))
        high[key] = max(high[key], end)
    for s in acks:
        key = (s.dst, s.dport, s.src, s.sport)
        if key in flows and s.flags & ACK:
            b = base[key]
            flows[key].acks.append((s.t, (s.ack - b) % 2**32))
            flows[key].sacks += [(s.t, (left - b) % 2**32, (right - b) % 2**32) for left, right in s.sack]
    return list(flows.values())


def data_packets(path: Path, dport: int | None = None, sport: int | None = None) -> dict[tuple, int]:
    """Data-carrying TCP segments per flow (src, sport, dst, dport), optionally only toward/from a port."""
    out: dict[tuple, int] = {}
    for s in tcp_segments(path):
        if s.payload and (dport is None or s.dport == dport) and (sport is None or s.sport == sport):
            key = (s.src, s.sport, s.dst, s.dport)
            out[key] = out.get(key, 0) + 1
    return out
