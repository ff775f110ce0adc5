"""The signal from the controller on node 2 to node 1's agent where they are separate machines (the hosts
testbed): the controller runs on node 2's host and node 1's tbf is changed by an agent on node 1's host (obey),
to which the controller signals each rate change in a UDP datagram sent to node 1's address on link B: the
signal crosses link B backwards, as a PAUSE frame would. There the latency ends when the signal leaves node 2
(as with real frames); the agent's own time from datagram to tbf change in force is reported beside it
(agent_apply_s).

    "SEQ BPS"    one datagram: the rate node 1 is to send at, numbered; the newest number wins
"""
from __future__ import annotations

import json
import signal
import socket
import time

from .config import EmulatedPauseConfig
from .realtime import speed_up
from .rtnl import Rtnl

RESEND_EVERY = 0.1   # seconds between repeats of the rate in force to a remote agent (a lost XON must not last)


class RateSignal:
    """The controller's end of the signal to a remote node 1: "SEQ BPS" datagrams, each new rate with the next
    sequence number; the rate in force is repeated every RESEND_EVERY so a lost datagram costs at most that."""

    def __init__(self, address: str, port: int):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect((address, port))
        self.seq, self.message, self.sent_at = 0, b"", 0.0

    def send(self, bps: float) -> None:
        self.seq += 1
        self.message = f"{self.seq} {round(bps)}".encode()
        self._send(time.monotonic())

    def _send(self, now: float) -> None:
        self.sent_at = now
        try:
            self.sock.send(self.message)
        except OSError:
            pass   # a refused datagram (agent gone) is noticed by the runner; the next repeat tries again

    def repeat(self, now: float) -> None:
        if self.message and now - self.sent_at >= RESEND_EVERY:
            self._send(now)


def obey(cfg: EmulatedPauseConfig, out) -> int:
    """Node 1's agent on another machine: applies to its tbf the rates the controller on node 2 signals (from
    node 2's address on link B only), the newest sequence number winning; on SIGTERM it leaves link B at μ1
    and reports what it did."""
    up = Rtnl(cfg.up_ns, cfg.up_dev)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((cfg.signal_to, cfg.signal_port or 0))
    sock.settimeout(0.2)   # how soon a SIGTERM is noticed
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    speed_up()
    out.write(json.dumps({"ready": True, "port": sock.getsockname()[1]}) + "\n")
    out.flush()
    last, signals, foreign, apply_s = 0, 0, 0, []
    try:
        while not stop:
            try:
                data, (source, _) = sock.recvfrom(64)
            except (socket.timeout, InterruptedError):
                continue
            if cfg.signal_from is not None and source != cfg.signal_from:
                foreign += 1   # not node 2 across link B: stray traffic must not pause the link
                continue
            signals += 1
            try:
                seq, bps = (int(w) for w in data.split())
            except ValueError:
                continue
            if seq <= last:
                continue   # a repeat, or overtaken
            t = time.monotonic()
            up.change_tbf(round(bps / 8), cfg.wire_bytes, cfg.up_limit)
            apply_s.append(time.monotonic() - t)
            last = seq
    finally:
        up.change_tbf(round(cfg.rate_bps / 8), cfg.wire_bytes, cfg.up_limit)
        out.write(json.dumps({"agent": {"signals": signals, "foreign": foreign, "applied": len(apply_s),
                                        "apply_s": apply_s}}) + "\n")
        out.flush()
    return 0
