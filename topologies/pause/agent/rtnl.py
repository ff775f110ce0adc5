"""Just enough rtnetlink for the PAUSE controller's fast path: read one qdisc's queue length and change tbf's
rate, each a single request on a socket opened once, in the namespace the device lives in.

Spawning `tc` costs milliseconds per call; a request on a persistent NETLINK_ROUTE socket costs tens of
microseconds, which is what lets the controller poll node 2's queue often and react well under 1 ms.

Layouts (include/uapi/linux/rtnetlink.h, pkt_sched.h, gen_stats.h):
    nlmsghdr  len u32, type u16, flags u16, seq u32, pid u32
    tcmsg     family u8, pad u8, pad u16, ifindex i32, handle u32, parent u32, info u32
    rtattr    len u16, type u16, payload padded to 4 bytes
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from contextlib import contextmanager

NETLINK_ROUTE = 0
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_ECHO = 0x1, 0x4, 0x8
NLA_F_NESTED = 0x8000
TCA_KIND, TCA_OPTIONS, TCA_STATS2 = 1, 2, 7
TCA_STATS_QUEUE = 3
TCA_TBF_PARMS, TCA_TBF_RATE64, TCA_TBF_BURST = 1, 4, 6
TC_H_ROOT = 0xFFFFFFFF
TC_LINKLAYER_ETHERNET = 1
CLONE_NEWNET = 0x40000000

_NLMSG = struct.Struct("=IHHII")
_TCMSG = struct.Struct("=BBHiIII")
_RTA = struct.Struct("=HH")
_RATESPEC = struct.Struct("=BBHhHI")
_QUEUE = struct.Struct("=IIIII")   # gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
_SEQ = struct.Struct("=I")         # nlmsghdr's seq, at offset 8

_libc = ctypes.CDLL(None, use_errno=True)


def parse_handle(text: str) -> int:
    """tc's "10:" or "1:1" -> the 32-bit handle."""
    major, _, minor = text.partition(":")
    return (int(major or "0", 16) << 16) | int(minor or "0", 16)


@contextmanager
def in_namespace(ns: str | None):
    """Runs the body with this thread in network namespace ns (a name under /run/netns; None: stay).

    Sockets keep the namespace they were created in, so a process can hold sockets in several namespaces."""
    if ns is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    except FileNotFoundError:
        os.close(own)
        raise OSError(errno.ENOENT, f"no network namespace {ns!r} (/run/netns/{ns})") from None
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns into {ns}: {os.strerror(e)}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"setns back from {ns}: {os.strerror(e)}")
    finally:
        os.close(target)
        os.close(own)


def _attr(kind: int, payload: bytes) -> bytes:
    data = _RTA.pack(_RTA.size + len(payload), kind) + payload
    return data + b"\0" * (-len(data) % 4)


def _attrs(buf: bytes, off: int, end: int):
    while off + _RTA.size <= end:
        length, kind = _RTA.unpack_from(buf, off)
        if length < _RTA.size:
            break
        yield kind & 0x3FFF, off + _RTA.size, off + length
        off += (length + 3) & ~3


class QdiscStats(tuple):
    """(qlen, backlog_bytes, drops) of one qdisc."""
    __slots__ = ()

    @property
    def qlen(self) -> int:
        return self[0]

    @property
    def backlog(self) -> int:
        return self[1]

    @property
    def drops(self) -> int:
        return self[2]


class Rtnl:
    """A NETLINK_ROUTE socket in one namespace, bound to one device."""

    def __init__(self, ns: str | None, dev: str):
        self.ns, self.dev = ns, dev
        with in_namespace(ns):
            try:
                self.ifindex = socket.if_nametoindex(dev)
            except OSError:
                where = f" in namespace {ns}" if ns else ""
                raise OSError(errno.ENODEV, f"no interface {dev!r}{where}") from None
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self.sock.bind((0, 0))
        self.seq = 0
        self.buf = bytearray(65536)
        self._gets: dict[int, bytearray] = {}          # handle -> its RTM_GETQDISC request, built once
        self._queue_at: dict[tuple[int, int], int] = {}  # (handle, reply length) -> where gnet_stats_queue is

    def close(self) -> None:
        self.sock.close()

    def _request(self, kind: int, flags: int, tcm: bytes, attrs: bytes = b"") -> memoryview:
        self.seq += 1
        body = tcm + attrs
        return self._exchange(_NLMSG.pack(_NLMSG.size + len(body), kind, flags, self.seq, 0) + body)

    def _exchange(self, request) -> memoryview:
        """Sends one request (its sequence number self.seq) and returns the reply to it."""
        self.sock.send(request)
        while True:
            n = self.sock.recv_into(self.buf)
            view = memoryview(self.buf)[:n]
            length, mtype, _, seq, _ = _NLMSG.unpack_from(view, 0)
            if seq != self.seq:
                continue  # a stale reply (an earlier request's ack); ours follows
            if mtype == NLMSG_ERROR:
                code = struct.unpack_from("=i", view, _NLMSG.size)[0]
                if code:
                    raise OSError(-code, f"{os.strerror(-code)} (rtnetlink, {self.dev})")
            return view[:length]

    def qdisc_stats(self, handle: int) -> QdiscStats:
        """The queue statistics of the qdisc with this handle on the device (RTM_GETQDISC by handle).

        The controller's hot path (loop.py polls up to 10k times a second): the request is built once, and the
        reply, whose layout a qdisc keeps from one dump to the next, is walked once per length; later replies of
        that length are read where the statistics were, after checking the attribute header that holds them."""
        req = self._gets.get(handle)
        if req is None:
            # the kernel answers a GET through rtnetlink_send(), which unicasts to the asker only with ECHO
            body = _TCMSG.pack(0, 0, 0, self.ifindex, handle, 0, 0)
            req = self._gets[handle] = bytearray(
                _NLMSG.pack(_NLMSG.size + len(body), RTM_GETQDISC, NLM_F_REQUEST | NLM_F_ECHO, 0, 0) + body)
        self.seq += 1
        _SEQ.pack_into(req, 8, self.seq)
        msg = self._exchange(req)
        key = (handle, len(msg))
        at = self._queue_at.get(key)
        if at is None or _RTA.unpack_from(msg, at - _RTA.size) != (_RTA.size + _QUEUE.size, TCA_STATS_QUEUE):
            at = self._queue_at[key] = self._find_queue(msg, handle)
        qlen, backlog, drops, _, _ = _QUEUE.unpack_from(msg, at)
        return QdiscStats((qlen, backlog, drops))

    def _find_queue(self, msg: memoryview, handle: int) -> int:
        """Where a qdisc reply holds its gnet_stats_queue (TCA_STATS2 > TCA_STATS_QUEUE)."""
        for kind, a, b in _attrs(msg, _NLMSG.size + _TCMSG.size, len(msg)):
            if kind == TCA_STATS2:
                for k2, c, _ in _attrs(msg, a, b):
                    if k2 == TCA_STATS_QUEUE:
                        return c
        raise OSError(errno.EPROTO, f"no queue statistics for qdisc {handle:#x} on {self.dev}")

    def change_tbf(self, rate_bytes_ps: int, burst: int, limit: int, handle: int = 0x10000) -> None:
        """`tc qdisc change dev D root handle H tbf rate R burst B limit L`, as one request.

        tbf resets its bucket to `burst` on every change (sch_tbf.c tbf_change), so a change never leaves the
        debt htb keeps after a slow packet. limit goes to the child fifo unchanged (fifo_set_limit): packets
        for a pfifo child. rate must be >= 1 byte/s: 0 would make tbf unlimited, not stopped."""
        rate_bytes_ps = max(1, int(rate_bytes_ps))
        rate = _RATESPEC.pack(0, TC_LINKLAYER_ETHERNET, 0, -1, 0, min(rate_bytes_ps, 0xFFFFFFFF))
        nopeak = _RATESPEC.pack(0, 0, 0, 0, 0, 0)
        parms = rate + nopeak + struct.pack("=III", limit, 0, 0)
        opts = _attr(TCA_TBF_PARMS, parms) + _attr(TCA_TBF_BURST, struct.pack("=I", burst))
        if rate_bytes_ps >= 1 << 32:
            opts += _attr(TCA_TBF_RATE64, struct.pack("=Q", rate_bytes_ps))
        attrs = _attr(TCA_KIND, b"tbf\0") + _attr(TCA_OPTIONS | NLA_F_NESTED, opts)
        self._request(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK,
                      _TCMSG.pack(0, 0, 0, self.ifindex, handle, TC_H_ROOT, 0), attrs)
