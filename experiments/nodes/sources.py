"""The traffic sources' program (Keshav 003's sources): UDP packets on a schedule (cbr, poisson, onoff, flood)
and small TCP messages after think times (interactive), each with a receiver that logs every packet's send
and receipt time.

    receiver:  python sources.py udp-recv --port 5201 --key 5201:20001
    sender:    python sources.py udp-send --to 198.18.2.2 --port 5201 --cport 20001 --pattern poisson \
                   --pps 1000 --size 1472 --duration 30
    receiver:  python sources.py msg-recv --port 5202 --key 5202:20002
    sender:    python sources.py msg-send --to 198.18.2.3 --port 5202 --cport 20002 --size 40 --think 5 \
                   --gaps exponential --duration 30 --cc cubic

Why a program of our own and not iperf3 -u or D-ITG (measured on this 2-core machine, kernel 6.18, one veth
pair between two namespaces, 1000 packets/s of 1472 bytes for 10 s, interarrival times from the receiver's
kernel timestamps; see experiments/workloads/udp.py for the numbers): iperf3 has no Poisson or on/off schedule
at all, and its constant rate is a burst every pacing tick (--pacing-timer, 1 ms by default) rather than evenly
spaced packets; this program's schedule is exact on average (each send time is computed from the start, so a
late wake-up never shifts the ones after it) and its gaps are off by the wake-up latency only. D-ITG would do
both but logs in its own binary format on both ends, which would have to be fetched from every host.

UDP packets carry a 24-byte header: sequence number, the sender's wall-clock send time, and the payload bytes
sent so far including this packet (so the receiver knows what was offered, not only what arrived). TCP messages
carry sequence number and send time (16 bytes). The receiver stamps arrivals with the kernel's receive time
(SO_TIMESTAMPNS), so its own scheduling blurs neither the interarrival times nor the delays: a UDP packet's own
receipt, and for TCP the receipt of the last segment read with the message (a message is one segment:
TCP_NODELAY, as a Telnet keystroke is one packet).

Both receivers print, every --period seconds, one JSON line in the TCP_INFO sampler's format (experiments/
sampler.py), so the runner reads it as it reads a sampler:
    {"t": <unix time>, "s": {"<key>": {"bytes_acked": delivered, "bytes_received": delivered,
     "bytes_sent": offered, "data_segs_out": packets offered, "data_segs_in": packets delivered}},
     "p": [[seq, t_send, t_recv, bytes], ...]}          # the packets received since the previous line
Senders print one JSON line when they are done: {"sent": packets, "bytes": payload bytes, "errors": n,
"t_start": .., "t_end": .., "on": [[start, end], ...]}.

Standard library only: it runs with any python3 on a node (namespaces, Mininet hosts, over SSH).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

UDP_HEADER = struct.Struct("!QdQ")    # seq, send time (unix seconds), payload bytes sent so far incl. this one
MSG_HEADER = struct.Struct("!Qd")     # seq, send time
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # asm-generic/socket.h; Python does not name it
_TIMESPEC = struct.Struct("@qq")
PR_SET_TIMERSLACK = 29
# the most packets/s a paced sender runs at real-time priority: a send costs ~25 us here (a flood of 1472-byte
# packets reached 40700 packets/s over an unshaped veth pair), so at 10000/s it still sleeps 3/4 of the time
REALTIME_PPS = 10000


def _fine_timers(realtime: bool = True) -> None:
    """Asks the kernel to wake this process within 1 ns of its sleep's end instead of the default 50 us slack,
    and to run it ahead of every ordinary process (SCHED_FIFO, the lowest real-time priority; where allowed:
    root). Measured here with other work on both cores (load 4.5): without the priority the sender stalled for
    up to 24 ms at a time and a 2000 packets/s Poisson stream reached the receiver with an interarrival CV of
    1.65 (a stall, then a burst catching up); with it, see tests/host/test_sources.py. Only a sender that
    sleeps between packets asks for it (realtime): not a flood, nor one whose rate leaves no time to sleep
    (above REALTIME_PPS), which would hold a core against everything else on the node."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if not realtime:
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        pass   # not root: ordinary scheduling, its stalls show in the interarrival times


# --- schedules: the send times of a paced source, seconds after its start ---------------------------------

def cbr_times(pps: float, duration: float):
    k = 0
    while k / pps < duration:
        yield k / pps
        k += 1


def poisson_times(pps: float, duration: float, rng: random.Random):
    t = rng.expovariate(pps)
    while t < duration:
        yield t
        t += rng.expovariate(pps)


def onoff_times(pps: float, on: float, off: float, exponential: bool, duration: float, rng: random.Random,
                periods: list):
    """Constant rate during each on period, nothing during each off period; starts on. The on periods as
    scheduled are appended to `periods` as [start, end]."""
    t = 0.0
    while t < duration:
        length = rng.expovariate(1 / on) if exponential else on
        end = min(t + length, duration)
        periods.append([t, end])
        k = 0
        while t + k / pps < end:
            yield t + k / pps
            k += 1
        t = end + (rng.expovariate(1 / off) if exponential else off)


def paced(times, start: float):
    """Sleeps until each scheduled time (monotonic seconds after start) and yields; a late wake-up sends at once
    and the next times stay where the schedule put them, so the mean rate is exact."""
    for t in times:
        delay = start + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield t


# --- UDP --------------------------------------------------------------------------------------------------

def udp_send(a) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("", a.cport))
    sock.connect((a.to, a.port))   # connected: `ss state established` shows a parked sender (wait_go)
    _wait_go(a)
    if a.pattern != "flood":
        _fine_timers(realtime=a.pps <= REALTIME_PPS)
    rng = random.Random(a.seed)
    payload = bytearray(max(a.size, UDP_HEADER.size))
    periods: list = []
    start = time.monotonic()
    if a.pattern == "flood":
        times = None
    elif a.pattern == "cbr":
        times = cbr_times(a.pps, a.duration)
    elif a.pattern == "poisson":
        times = poisson_times(a.pps, a.duration, rng)
    else:
        times = onoff_times(a.pps, a.on, a.off, a.periods == "exponential", a.duration, rng, periods)
    sent = sent_bytes = errors = 0
    t_wall0 = time.time()
    it = paced(times, start) if times is not None else iter(lambda: time.monotonic() - start < a.duration, False)
    for _ in it:
        sent_bytes += len(payload)
        UDP_HEADER.pack_into(payload, 0, sent, time.time(), sent_bytes)
        try:
            sock.send(payload)
            sent += 1
        except OSError:   # ENOBUFS/ECONNREFUSED: not sent; the next packet reuses the number
            sent_bytes -= len(payload)
            errors += 1
    return {"sent": sent, "bytes": sent_bytes, "errors": errors, "t_start": t_wall0, "t_end": time.time(),
            "on": [[t_wall0 + s, t_wall0 + e] for s, e in periods]}


class Counts:
    """A receiver's cumulative counters and the packets seen since they were last printed."""

    def __init__(self, key: str):
        self.key = key
        self.delivered = self.packets = 0
        self.offered_bytes = self.offered_packets = 0
        self.fresh: list = []

    def add(self, seq: int, t_send: float, t_recv: float, size: int, offered: int | None = None) -> None:
        self.delivered += size
        self.packets += 1
        self.offered_packets = max(self.offered_packets, seq + 1)
        self.offered_bytes = max(self.offered_bytes, offered if offered is not None else self.delivered)
        self.fresh.append([seq, round(t_send, 9), round(t_recv, 9), size])

    def line(self) -> str:
        fields = {"bytes_acked": self.delivered, "bytes_received": self.delivered, "bytes_sent": self.offered_bytes,
                  "data_segs_out": self.offered_packets, "data_segs_in": self.packets}
        out = json.dumps({"t": time.time(), "s": {self.key: fields}, "p": self.fresh}, separators=(",", ":"))
        self.fresh = []
        return out


def _stamp(ancillary) -> float:
    """The kernel's receive time (SO_TIMESTAMPNS) from recvmsg's ancillary data; now, where there is none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec + nsec * 1e-9
    return time.time()


def _ticking(counts: Counts, period: float, wait_and_read) -> None:
    """Runs until SIGTERM: wait_and_read(timeout) takes what arrived; a line is printed every period (and
    once more at the end), packets or not, so a reader knows the receiver is alive and how far it has seen."""
    running = [True]

    def stop(*_):
        running[0] = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    next_tick = time.monotonic()
    try:
        while running[0]:
            now = time.monotonic()
            if now >= next_tick:
                print(counts.line(), flush=True)
                next_tick = max(next_tick + period, now)
            wait_and_read(next_tick - time.monotonic())
        print(counts.line(), flush=True)
    except BrokenPipeError:
        pass


def udp_recv(a) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)   # a burst is not lost to our own socket
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((a.bind, a.port))
    sock.setblocking(False)
    counts = Counts(a.key)
    buf = bytearray(65536)
    cmsg_space = socket.CMSG_SPACE(_TIMESPEC.size)

    def wait_and_read(timeout: float) -> None:
        if not select.select([sock], [], [], max(0.0, timeout))[0]:
            return
        while True:   # drain what is queued
            try:
                n, anc, _flags, _addr = sock.recvmsg_into([buf], cmsg_space)
            except (BlockingIOError, InterruptedError):
                return
            if n < UDP_HEADER.size:
                continue   # not one of ours
            seq, t_send, offered = UDP_HEADER.unpack_from(buf)
            counts.add(seq, t_send, _stamp(anc), n, offered)

    _ticking(counts, a.period, wait_and_read)


# --- TCP messages (interactive) -----------------------------------------------------------------------------

def msg_send(a) -> dict:
    sock = socket.create_connection((a.to, a.port), timeout=10, source_address=("", a.cport))
    if a.cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.cc.encode())
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # one message, one segment: a keystroke
    sock.settimeout(None)
    _wait_go(a)
    _fine_timers(realtime=a.think >= 1 / REALTIME_PPS)
    rng = random.Random(a.seed)
    payload = bytearray(max(a.size, MSG_HEADER.size))
    sent = 0
    t_wall0, start = time.time(), time.monotonic()
    t = 0.0
    while True:
        t += rng.expovariate(1 / a.think) if a.gaps == "exponential" else a.think
        if t >= a.duration:
            break
        delay = start + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        MSG_HEADER.pack_into(payload, 0, sent, time.time())
        sock.sendall(payload)
        sent += 1
    # the socket's last counters must reach the TCP_INFO sampler (every 20 ms) before it closes: the runner
    # cross-checks them against the receiver's count
    time.sleep(0.1)
    sock.shutdown(socket.SHUT_WR)
    return {"sent": sent, "bytes": sent * len(payload), "errors": 0, "t_start": t_wall0, "t_end": time.time(),
            "on": []}


def msg_recv(a) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.bind, a.port))
    srv.listen(1)
    srv.setblocking(False)
    counts = Counts(a.key)
    conns: list[socket.socket] = []
    pending: dict[socket.socket, bytearray] = {}

    cmsg_space = socket.CMSG_SPACE(_TIMESPEC.size)

    def wait_and_read(timeout: float) -> None:
        ready = select.select([srv, *conns], [], [], max(0.0, timeout))[0]
        for s in ready:
            if s is srv:
                c, _ = srv.accept()
                c.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                c.setblocking(False)
                conns.append(c)
                pending[c] = bytearray()
                continue
            try:
                data, anc, _flags, _addr = s.recvmsg(65536, cmsg_space)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                conns.remove(s)
                s.close()
                continue
            # the kernel's receive time of the last segment read: every whole message in it had arrived by then
            now = _stamp(anc)
            buf = pending[s]
            buf += data
            while len(buf) >= a.size:
                seq, t_send = MSG_HEADER.unpack_from(buf)
                counts.add(seq, t_send, now, a.size)
                del buf[:a.size]

    _ticking(counts, a.period, wait_and_read)


# --- command line ----------------------------------------------------------------------------------------

def _wait_go(a) -> None:
    if a.wait_go:
        signal.sigwait({signal.SIGUSR1})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sources.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("udp-recv", "msg-recv"):
        r = sub.add_parser(name, help="receive and log every packet (runs until SIGTERM)")
        r.add_argument("--port", type=int, required=True)
        r.add_argument("--bind", default="0.0.0.0")
        r.add_argument("--key", default="", help="the flow's name in the output lines (LPORT:RPORT)")
        r.add_argument("--period", type=float, default=0.02, help="seconds between output lines")
        r.add_argument("--size", type=int, default=40, help="msg-recv: the message size in bytes")
    for name in ("udp-send", "msg-send"):
        s = sub.add_parser(name, help="send for --duration seconds, then print the totals")
        s.add_argument("--to", required=True)
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--cport", type=int, default=0)
        s.add_argument("--size", type=int, required=True, help="payload bytes per packet or message")
        s.add_argument("--duration", type=float, required=True)
        s.add_argument("--seed", type=int, default=None)
        s.add_argument("--wait-go", action="store_true", help="set up, then start only on SIGUSR1")
    u = sub.choices["udp-send"]
    u.add_argument("--pattern", choices=["cbr", "poisson", "onoff", "flood"], required=True)
    u.add_argument("--pps", type=float, default=0.0, help="packets per second (on periods for onoff)")
    u.add_argument("--on", type=float, default=0.0)
    u.add_argument("--off", type=float, default=0.0)
    u.add_argument("--periods", choices=["fixed", "exponential"], default="fixed")
    m = sub.choices["msg-send"]
    m.add_argument("--think", type=float, required=True, help="mean seconds between messages")
    m.add_argument("--gaps", choices=["fixed", "exponential"], default="exponential")
    m.add_argument("--cc", default=None)
    a = ap.parse_args(argv)
    if a.cmd == "udp-recv":
        udp_recv(a)
        return 0
    if a.cmd == "msg-recv":
        msg_recv(a)
        return 0
    if a.cmd == "udp-send" and a.pattern != "flood" and a.pps <= 0:
        ap.error("--pps must be positive")
    if a.cmd == "udp-send" and a.pattern == "onoff" and (a.on <= 0 or a.off <= 0):
        ap.error("--on and --off must be positive")
    if a.wait_go:
        # blocked before setting up: once the runner sees the socket, its signal can only be waited for
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        out = udp_send(a) if a.cmd == "udp-send" else msg_send(a)
    except OSError as e:
        print(f"sources: {a.to}:{a.port}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
