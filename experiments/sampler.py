#!/usr/bin/env python3
"""The kernel's own view of TCP flows: TCP_INFO of matching sockets through INET_DIAG, polled on a node.

Standard library only, so it runs unchanged on any node: in a namespace (`ip netns exec NS python3 sampler.py`),
on a Mininet host, or on a remote host over SSH (`ssh HOST python3 - ARGS < sampler.py`).

    sampler.py --period 0.02 --match 40001:5201 --match 40002:5202

Every period it dumps the TCP sockets whose (local port, remote port) match and prints one JSON line:
    {"t": <unix time>, "s": {"40001:5201": {field: value, ...}, ...}}
Fields are struct tcp_info's (linux/include/uapi/linux/tcp.h) that the metrics need, plus the socket's
congestion control (INET_DIAG_CONG). It stops on SIGTERM/SIGINT or when stdout closes.
"""
import argparse
import json
import signal
import socket
import struct
import sys
import time

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO, INET_DIAG_CONG = 2, 4
TCP_LISTEN, TCP_TIME_WAIT = 10, 6
STATES = 0xFFF & ~((1 << TCP_LISTEN) | (1 << TCP_TIME_WAIT))

# (name, struct format, offset) of the tcp_info fields we read; offsets from linux/tcp.h
TCP_INFO = [
    ("state", "B", 0), ("ca_state", "B", 1),
    ("rto_us", "I", 8), ("snd_mss", "I", 16), ("unacked", "I", 24), ("sacked", "I", 28), ("lost", "I", 32),
    ("retrans", "I", 36), ("pmtu", "I", 60), ("rtt_us", "I", 68), ("rttvar_us", "I", 72),
    ("snd_ssthresh", "I", 76), ("snd_cwnd", "I", 80), ("total_retrans", "I", 100),
    ("pacing_rate", "Q", 104), ("bytes_acked", "Q", 120), ("bytes_received", "Q", 128),
    ("segs_out", "I", 136), ("segs_in", "I", 140), ("min_rtt_us", "I", 148), ("data_segs_in", "I", 152),
    ("data_segs_out", "I", 156), ("delivery_rate", "Q", 160), ("delivered", "I", 192),
    ("delivered_ce", "I", 196), ("bytes_sent", "Q", 200), ("bytes_retrans", "Q", 208), ("dsack_dups", "I", 216),
]


def request(seq: int, family: int) -> bytes:
    ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1))
    req = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, ext, STATES) + bytes(48)
    return struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + req


def parse_info(data: bytes) -> dict:
    out = {}
    for name, fmt, off in TCP_INFO:
        size = struct.calcsize(fmt)
        if off + size <= len(data):
            out[name] = struct.unpack_from("=" + fmt, data, off)[0]
    return out


def dump(sock: socket.socket, seq: int, match: set) -> dict:
    """{"lport:rport": fields} for the sockets in match (all when match is empty), IPv4 and IPv6 (a server
    listening on :: accepts IPv4 connections as IPv6 sockets)."""
    found = dump_family(sock, seq, match, socket.AF_INET)
    found.update(dump_family(sock, seq, match, socket.AF_INET6))
    return found


def dump_family(sock: socket.socket, seq: int, match: set, family: int) -> dict:
    sock.send(request(seq, family))
    found = {}
    while True:
        buf = sock.recv(1 << 20)
        off = 0
        while off + 16 <= len(buf):
            length, mtype, _flags, _seq, _pid = struct.unpack_from("=IHHII", buf, off)
            if mtype == NLMSG_DONE:
                return found
            if mtype == NLMSG_ERROR:
                err = struct.unpack_from("=i", buf, off + 16)[0]
                raise OSError(-err, "INET_DIAG dump failed")
            body = off + 16
            sport, dport = struct.unpack_from("!HH", buf, body + 4)
            key = f"{sport}:{dport}"
            if not match or key in match:
                fields = {}
                a = body + 72
                while a + 4 <= off + length:
                    alen, atype = struct.unpack_from("=HH", buf, a)
                    if alen < 4:
                        break
                    payload = buf[a + 4:a + alen]
                    if atype == INET_DIAG_INFO:
                        fields.update(parse_info(payload))
                    elif atype == INET_DIAG_CONG:
                        fields["cc"] = payload.split(b"\0", 1)[0].decode()
                    a += (alen + 3) & ~3
                if fields:
                    found[key] = fields
            off += (length + 3) & ~3
        if off == 0:
            return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--period", type=float, default=0.02, help="seconds between dumps")
    p.add_argument("--match", action="append", default=[], help="LPORT:RPORT of a socket to report")
    p.add_argument("--count", type=int, default=0, help="stop after this many dumps (0: run until signalled)")
    args = p.parse_args(argv)
    running = [True]

    def stop(*_):
        running[0] = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    match = set(args.match)
    seq, n = 0, 0
    next_t = time.monotonic()
    try:
        while running[0]:
            seq += 1
            line = json.dumps({"t": time.time(), "s": dump(sock, seq, match)}, separators=(",", ":"))
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            n += 1
            if args.count and n >= args.count:
                break
            next_t += args.period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:  # fell behind (a busy machine): do not burst to catch up
                next_t = time.monotonic()
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
