"""Numbered UDP datagrams from one node of a test bed to another, for the tests that count what a link let through
(its loss) or check the order it kept (a delay line). Each end is a Python of its own in its node's namespace.

    rx = receive(bed, "b", port)          started, and ready (bound) when it returns
    send(bed, "a", bed.address("b"), port, n, size, pause_every)
    received(rx) -> [sequence numbers, in arrival order]
"""
from __future__ import annotations

import json
import subprocess
import sys

from ccrig.procs import wait_for_line

# The first datagram is awaited 60 s (a ping and the sender's Python start come first: a busy machine once took
# over 2 s to start the sender, and a receiver that gave up after 2 s counted 0 of 24741, CI 2026-11-28); after
# it, 2 s of silence is the end. Room for the whole burst (as root, past rmem_max: SO_RCVBUFFORCE): a receiver
# slowed by a busy machine otherwise overflows the default ~200 KB and the kernel drops what the link delivered
# (2755 of 3000 in one CI run).
RECEIVER = """
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], int(sys.argv[2]))); s.settimeout(60)
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)   # SO_RCVBUFFORCE
print("ready", flush=True); seen = []
try:
    while True:
        seen.append(int.from_bytes(s.recv(65536)[:4], "big"))
        s.settimeout(2.0)
except socket.timeout:
    pass
print(json.dumps(seen), flush=True)
"""
# ADDR PORT N SIZE PAUSE_EVERY: n datagrams of SIZE bytes, each led by its number; a 2 ms pause after every
# PAUSE_EVERY of them (0: none, a tight loop that may overrun its own socket)
SENDER = """
import socket, sys, time
addr, port, n, size, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n):
    s.sendto(i.to_bytes(4, "big") + bytes(size - 4), (addr, port))
    if every and i % every == every - 1:
        time.sleep(0.002)
"""


def receive(bed, node: str, port: int) -> subprocess.Popen:
    """The receiver on node, bound to its address and port."""
    rx = bed.popen(node, [sys.executable, "-c", RECEIVER, bed.address(node), str(port)], stdout=subprocess.PIPE)
    assert wait_for_line(rx, rx.stdout, "ready", 30) == "ready"
    return rx


def send(bed, node: str, to: str, port: int, n: int, size: int, pause_every: int = 0) -> None:
    bed.run(node, [sys.executable, "-c", SENDER, to, str(port), str(n), str(size), str(pause_every)], timeout=60)


def received(rx: subprocess.Popen) -> list[int]:
    """The sequence numbers the receiver got, once it has ended (2 s after the last)."""
    out, _ = rx.communicate(timeout=90)
    return json.loads(out.strip().splitlines()[-1])
