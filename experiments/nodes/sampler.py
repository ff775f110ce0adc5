#!/usr/bin/env python3
"""The kernel's own view of TCP flows: TCP_INFO of chosen sockets through INET_DIAG, for every network namespace
of one machine from ONE process.

Standard library only, so it ships unchanged to any node: this machine, a Mininet host, a remote host over SSH.

    sampler.py --period 0.02 --ns /run/netns/ccrig-1-s1 --sock 10.0.1.1,20001,10.0.2.1,5201 \
               --ns ino:4026532 --sock 10.0.2.1,5201,10.0.1.1,20001 ...
    sampler.py --period 0.02 --match 20001:5201            (the namespace it runs in, every socket dumped)

--ns names a namespace by path (/run/netns/NAME, /proc/PID/ns/net) or by inode (`ino:N`, as a node reports
`stat -L -c %i /proc/self/ns/net`; found under /run/netns or /proc/*/ns/net). A netlink socket created while
the process sits in that namespace (setns there, socket(), setns back) stays bound to it, so one process polls
them all. Each --sock after it is one socket as LOCAL_ADDR,LOCAL_PORT,REMOTE_ADDR,REMOTE_PORT (IPv4); its key is
"LOCAL_PORT:REMOTE_PORT".

Why exact lookups and not dumps: a dump (NLM_F_DUMP, what `ss` does) walks the whole TCP established hash table,
which the kernel shares among all namespaces (262144 buckets on this 2-core machine): one dump costs ~0.3 ms
of kernel time however few sockets match, so 200 namespaces x 2 families at 50 Hz is several cores (the cause of
a load average of 220 at 300 flows). An exact lookup by 4-tuple is one hash probe. All of a namespace's requests go
in one send(); their replies are read in one pass. An IPv4 lookup also finds a dual-stack IPv6 socket carrying
an IPv4 connection (the kernel looks v4-mapped connections up in the same table); a lookup that lands on the
listener (a server socket before its connection exists) or a TIME_WAIT socket is not reported.

Python or C: measured on this 2-core machine (100 flows = 200 sockets in 101 namespaces, 50 Hz, the machine
busy with other work), this Python sampler takes 0.26 of a core, the same work in C (experiments/nodes/sampler.c,
same command line and output) 0.05. Python spends it building 200 dicts and their JSON each period; what is
left in C is mostly the kernel's (one send and one or two recv per namespace, one tcp_info per socket). So the
runner builds and runs the C sampler on this machine (experiments/run/collectors.py: native_sampler), and this file
stays the sampler wherever no compiler is at hand (a remote host over SSH, where it ships as is) and for one
namespace's dump (--match) that tests and tools use.

Every period it prints one JSON line:
    {"t": <unix time>, "s": {"20001:5201": {field: value, ...}, ...}, "cpu": <its CPU seconds so far>}
the first with "sched": the priority it got ("fifo": real-time, "nice", or "": the default; sampler.c says why).
Fields are struct tcp_info's (linux/include/uapi/linux/tcp.h) that the metrics need, plus the socket's
congestion control (INET_DIAG_CONG). The first line comes after the first poll (the caller's clock starts
there). It stops on SIGTERM/SIGINT or when stdout closes.
"""
import argparse
import ctypes
import json
import os
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
EXT = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1))
CLONE_NEWNET = 0x40000000
NOCOOKIE = 0xFFFFFFFF

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
NAMES = [n for n, _, _ in TCP_INFO]


def _layout():
    """One struct for the whole tcp_info prefix we read (one unpack per socket), padding between the fields."""
    fmt, at = "=", 0
    for _, f, off in TCP_INFO:
        fmt += (f"{off - at}x" if off > at else "") + f
        at = off + struct.calcsize(f)
    return struct.Struct(fmt)


INFO = _layout()


def parse_info(data: bytes) -> dict:
    if len(data) >= INFO.size:
        return dict(zip(NAMES, INFO.unpack_from(data)))
    out = {}   # an older kernel's shorter tcp_info: the fields it has
    for name, fmt, off in TCP_INFO:
        size = struct.calcsize(fmt)
        if off + size <= len(data):
            out[name] = struct.unpack_from("=" + fmt, data, off)[0]
    return out


def attributes(buf: bytes, a: int, end: int, fields: dict) -> None:
    """INET_DIAG_INFO and INET_DIAG_CONG of one reply, into fields."""
    while a + 4 <= end:
        alen, atype = struct.unpack_from("=HH", buf, a)
        if alen < 4:
            break
        if atype == INET_DIAG_INFO:
            fields.update(parse_info(buf[a + 4:a + alen]))
        elif atype == INET_DIAG_CONG:
            fields["cc"] = buf[a + 4:a + alen].split(b"\0", 1)[0].decode()
        a += (alen + 3) & ~3


def keep(found: dict, key: str, buf: bytes, off: int, length: int) -> None:
    """The socket of the INET_DIAG reply at off (after its netlink header and inet_diag_msg): its fields under key."""
    fields = {}
    attributes(buf, off + 16 + 72, off + length, fields)
    if fields:
        found[key] = fields


# --- one namespace, every socket dumped (the old single-namespace mode, --match) ---------------------------
def request(seq: int, family: int) -> bytes:
    req = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, EXT, STATES) + bytes(48)
    return struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + req


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
            sport, dport = struct.unpack_from("!HH", buf, off + 20)
            key = f"{sport}:{dport}"
            if not match or key in match:
                keep(found, key, buf, off, length)
            off += (length + 3) & ~3
        if off == 0:
            return found


# --- many namespaces, chosen sockets looked up by 4-tuple -------------------------------------------------
def lookup(seq: int, src: str, sport: int, dst: str, dport: int) -> bytes:
    """An exact INET_DIAG request (no NLM_F_DUMP) for one IPv4 socket, seen from its own end."""
    sockid = (struct.pack("!HH", sport, dport) + socket.inet_aton(src) + bytes(12) + socket.inet_aton(dst)
              + bytes(12) + struct.pack("=III", 0, NOCOOKIE, NOCOOKIE))
    req = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, EXT, STATES) + sockid
    return struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + req


# requests sent at once: their replies (~400 bytes each) must fit the socket's receive buffer, which
# net.core.rmem_max caps (208 KiB by default), or the kernel drops some
CHUNK = 128


class Namespace:
    """One namespace's netlink socket and the requests for its sockets, sent CHUNK at a time."""

    def __init__(self, sock: socket.socket, socks: list):
        self.sock = sock
        self.keys = {}   # seq -> key
        parts = []
        for i, (src, sport, dst, dport) in enumerate(socks, 1):
            self.keys[i] = f"{sport}:{dport}"
            parts.append(lookup(i, src, sport, dst, dport))
        self.batches = [(b"".join(parts[i:i + CHUNK]), len(parts[i:i + CHUNK])) for i in range(0, len(parts), CHUNK)]

    def poll(self, found: dict) -> None:
        for batch, count in self.batches:
            self._poll(batch, count, found)

    def _poll(self, batch: bytes, left: int, found: dict) -> None:
        self.sock.send(batch)
        while left:
            buf = self.sock.recv(1 << 20)
            off = 0
            while off + 16 <= len(buf):
                length, mtype, _flags, seq, _pid = struct.unpack_from("=IHHII", buf, off)
                if length < 16:
                    return
                left -= 1   # each request has one answer: the socket, or an error (ENOENT: not there)
                if mtype == SOCK_DIAG_BY_FAMILY and seq in self.keys:
                    state = buf[off + 17]
                    sport, dport = struct.unpack_from("!HH", buf, off + 20)
                    key = self.keys[seq]
                    # a lookup that fell on the listener or a TIME_WAIT socket is not the connection
                    if state not in (TCP_LISTEN, TCP_TIME_WAIT) and key == f"{sport}:{dport}":
                        keep(found, key, buf, off, length)
                off += (length + 3) & ~3
            if off == 0:
                return


def _setns():
    if hasattr(os, "setns"):   # Python 3.12+
        return lambda fd: os.setns(fd, CLONE_NEWNET)
    libc = ctypes.CDLL(None, use_errno=True)

    def setns(fd):
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return setns


def socket_in(path: str, setns, home: int, *args) -> socket.socket:
    """socket.socket(*args) made in the namespace path enters (it stays bound there), this thread back home after.
    Also experiments/nodes/warm.py's."""
    fd = os.open(path, os.O_RDONLY)
    try:
        setns(fd)
        return socket.socket(*args)
    finally:
        setns(home)
        os.close(fd)


def find_inodes(inodes: set) -> dict:
    """inode -> a path that enters that namespace: /run/netns first, then any process living in it."""
    out = {}
    places = []
    try:
        places += [os.path.join("/run/netns", n) for n in sorted(os.listdir("/run/netns"))]
    except OSError:
        pass
    places += [f"/proc/{p}/ns/net" for p in os.listdir("/proc") if p.isdigit()]
    for path in places:
        if len(out) == len(inodes):
            break
        try:
            ino = os.stat(path).st_ino
        except OSError:
            continue
        if ino in inodes and ino not in out:
            out[ino] = path
    return out


def open_namespaces(groups: list) -> list:
    """A Namespace per (name, sockets): the netlink socket made inside it."""
    setns = _setns()
    wanted = {int(n[4:]) for n, _ in groups if n.startswith("ino:")}
    paths = find_inodes(wanted) if wanted else {}
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    out = []
    try:
        for name, socks in groups:
            path = paths.get(int(name[4:])) if name.startswith("ino:") else name
            if path is None:
                raise OSError(f"no network namespace with inode {name[4:]} on this machine")
            sock = socket_in(path, setns, home, socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            out.append(Namespace(sock, socks))
    finally:
        os.close(home)
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--period", type=float, default=0.02, help="seconds between polls")
    p.add_argument("--match", action="append", default=[], help="LPORT:RPORT of a socket to report (dump mode)")
    p.add_argument("--ns", action="append", default=[], help="a namespace: a path or ino:INODE")
    p.add_argument("--sock", action="append", default=[], help="LADDR,LPORT,RADDR,RPORT in the last --ns")
    p.add_argument("--count", type=int, default=0, help="stop after this many polls (0: run until signalled)")
    args, groups = p.parse_args(argv), []
    # --sock belongs to the --ns before it: argparse keeps no order across options, so read argv again
    words = list(argv if argv is not None else sys.argv[1:])
    for i, w in enumerate(words):
        if w == "--ns":
            groups.append((words[i + 1], []))
        elif w == "--sock":
            if not groups:
                p.error("--sock before any --ns")
            a, sp, b, dp = words[i + 1].split(",")
            groups[-1][1].append((a, int(sp), b, int(dp)))
    return args, groups


def prioritise() -> str:
    """sampler.c's prioritise(): the lowest real-time priority, else nice -10 for itself and its autogroup, and a
    larger pipe ("fifo", "nice" or "")."""
    try:
        import fcntl
        fcntl.fcntl(1, 1031, 1 << 20)   # F_SETPIPE_SZ
    except (OSError, ImportError):
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return "fifo"
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("-10\n")
        os.setpriority(os.PRIO_PROCESS, 0, -10)
        return "nice"
    except OSError:
        return ""


def main(argv=None) -> int:
    args, groups = parse_args(argv)
    sched = prioritise()
    running = [True]

    def stop(*_):
        running[0] = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if groups:
        spaces = open_namespaces(groups)

        def poll(_seq):
            found = {}
            for ns in spaces:
                ns.poll(found)
            return found
    else:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        match = set(args.match)

        def poll(seq):
            return dump(sock, seq, match)
    seq, n = 0, 0
    next_t = time.monotonic()
    out = sys.stdout
    try:
        while running[0]:
            seq += 1
            found = poll(seq)
            c = os.times()
            line = {"t": time.time(), **({"sched": sched} if n == 0 else {}), "s": found,
                    "cpu": round(c[0] + c[1], 3)}
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
            out.flush()
            n += 1
            if args.count and n >= args.count:
                break
            next_t += args.period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:  # fell behind: do not burst to catch up, and leave the CPU half a period (sampler.c)
                next_t = time.monotonic() + args.period / 2
                time.sleep(args.period / 2)
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
