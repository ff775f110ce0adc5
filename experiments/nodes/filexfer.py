"""The finite-file workload (the PAUSE study's traffic, §V-B): each of N flows sends a file of S bytes, waits T
idle, and repeats, and every transfer's completion time is recorded.

    receiver:  python -m ccrig.experiments.nodes.filexfer serve --port 5300
    sender:    python -m ccrig.experiments.nodes.filexfer send --to 198.18.2.2 --port 5300 --flows 8 \
                   --size 80kb --idle 1s --duration 30s --cc reno --out transfers.csv

Each flow is one TCP connection kept open across its transfers (one flow = one congestion-control state, as
the study's sources are; Linux restarts the window after an idle longer than the RTO, as the kernel would for
any application). A transfer is an 8-byte length, then the file; the receiver answers one byte once it has
all of it, so the completion time is measured at the sender from the first byte written to the whole file
acknowledged by the application: what a user of a file download waits for.

Standard library only: it runs with any python3 on a node (the runner starts it as a script, files.py).
"""
from __future__ import annotations

import argparse
import csv
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CHUNK = 65536
FIELDS = ["flow", "transfer", "t_start", "t_end", "completion_s", "bytes"]
_LEN = struct.Struct("!Q")


@dataclass
class Transfer:
    flow: int
    transfer: int
    t_start: float          # wall-clock time the first byte was written
    t_end: float | None     # wall-clock time the receiver's answer arrived (None: did not complete)
    completion_s: float | None
    bytes: int


# --- receiver ---------------------------------------------------------------------------------------------

def _recv_exact(conn: socket.socket, n: int, buf: bytearray) -> bool:
    view = memoryview(buf)
    while n > 0:
        got = conn.recv_into(view[:min(n, len(buf))])
        if got == 0:
            return False
        n -= got
    return True


def _serve_conn(conn: socket.socket) -> None:
    buf = bytearray(CHUNK)
    with conn:
        while True:
            if not _recv_exact(conn, _LEN.size, buf):
                return
            size = _LEN.unpack_from(buf)[0]
            if not _recv_exact(conn, size, buf):
                return
            conn.sendall(b"\1")


def serve(port: int, bind: str = "0.0.0.0", ready=None) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, port))
    srv.listen(128)
    if ready is not None:
        ready()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve_conn, args=(conn,), daemon=True).start()


# --- sender -----------------------------------------------------------------------------------------------

def _connect(to: str, port: int, grace: float, cc: str | None, cport: int = 0) -> socket.socket:
    # a pinned client port lets the runner's TCP_INFO sampler find the socket by (local, remote) port
    sock = socket.create_connection((to, port), timeout=max(grace, 1.0), source_address=("", cport))
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    return sock


def _flow(index: int, sock: socket.socket, size: int, idle: float, until: float, grace: float,
          out: list[Transfer], lock: threading.Lock) -> None:
    payload = bytes(min(size, CHUNK))
    ack = bytearray(1)
    n = 0
    with sock:
        while time.monotonic() < until:
            t_wall, t0 = time.time(), time.monotonic()
            done = None
            try:
                sock.settimeout(max(0.1, until + grace - t0))
                sock.sendall(_LEN.pack(size))
                left = size
                while left > 0:
                    left -= sock.send(payload[:min(left, len(payload))])
                if sock.recv_into(ack, 1) == 1:
                    done = time.monotonic()
            except (socket.timeout, OSError):
                done = None
            elapsed = None if done is None else done - t0
            with lock:
                out.append(Transfer(index, n, t_wall, None if done is None else t_wall + elapsed, elapsed, size))
            if done is None:
                return  # the connection is in an unknown state: this flow stops
            n += 1
            rest = until - time.monotonic()
            if rest <= 0:
                return
            time.sleep(min(idle, rest))


def send(to: str, port: int, flows: int, size: int, idle: float, duration: float, cc: str | None = None,
         grace: float = 10.0, first_flow: int = 0, cport: int = 0, go=None) -> list[Transfer]:
    """Runs `flows` flows for `duration` seconds (no transfer starts after it; one under way gets `grace`
    more seconds) and returns every transfer, complete or not. cport: flow j's client port is cport + j
    (0: the kernel picks). go: called once every flow is connected; the flows start when it returns."""
    out: list[Transfer] = []
    lock = threading.Lock()
    socks = [_connect(to, port, grace, cc, cport + i if cport else 0) for i in range(flows)]
    if go is not None:
        go()
    until = time.monotonic() + duration
    threads = [threading.Thread(target=_flow, args=(first_flow + i, sock, size, idle, until, grace, out, lock),
                                daemon=True)
               for i, sock in enumerate(socks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out, key=lambda t: (t.t_start, t.flow))


def write_csv(path: Path, transfers: list[Transfer]) -> None:
    if str(path) == "-":
        _write_rows(sys.stdout, transfers)
        sys.stdout.flush()
        return
    with open(path, "w", newline="") as f:
        _write_rows(f, transfers)


def _write_rows(f, transfers: list[Transfer]) -> None:
    w = csv.writer(f)
    w.writerow(FIELDS)
    for t in transfers:
        w.writerow([t.flow, t.transfer, f"{t.t_start:.6f}", "" if t.t_end is None else f"{t.t_end:.6f}",
                    "" if t.completion_s is None else f"{t.completion_s:.6f}", t.bytes])


def read_csv(path: Path) -> list[Transfer]:
    def num(s):
        return float(s) if s else None
    with open(path) as f:
        return [Transfer(int(r["flow"]), int(r["transfer"]), float(r["t_start"]), num(r["t_end"]),
                         num(r["completion_s"]), int(r["bytes"])) for r in csv.DictReader(f)]


# --- command line -----------------------------------------------------------------------------------------

_SIZE = {"b": 1, "kb": 1000, "mb": 10 ** 6, "kib": 1024, "mib": 1024 ** 2}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _quantity(text: str, units: dict, what: str) -> float:
    import re
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)", text.strip())
    if not m or m.group(2).lower() not in units:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r}; expected e.g. "
                                         + ("80kb" if what == "size" else "1s or 250ms"))
    return float(m.group(1)) * units[m.group(2).lower()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ccrig.experiments.nodes.filexfer",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="receive files (runs until killed)")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bind", default="0.0.0.0")
    c = sub.add_parser("send", help="send files and write each transfer's completion time")
    c.add_argument("--to", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--flows", type=int, default=1)
    c.add_argument("--first-flow", type=int, default=0, help="number of the first flow in the output")
    c.add_argument("--size", type=lambda v: int(_quantity(v, _SIZE, "size")), required=True)
    c.add_argument("--idle", type=lambda v: _quantity(v, _TIME, "time"), required=True)
    c.add_argument("--duration", type=lambda v: _quantity(v, _TIME, "time"), required=True)
    c.add_argument("--grace", type=lambda v: _quantity(v, _TIME, "time"), default=10.0)
    c.add_argument("--cc", default=None)
    c.add_argument("--cport", type=int, default=0, help="client port of the first flow (the next get +1, ...)")
    c.add_argument("--out", type=Path, required=True, help="the transfers' CSV; - for standard output")
    c.add_argument("--wait-go", action="store_true",
                   help="connect, then start sending only on SIGUSR1 (the runner starts this Python early: it "
                        "takes seconds to start on a slow CPU, a guest under TCG, and the flow must start on time)")
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        try:
            serve(a.port, a.bind, ready=lambda: print("ready", flush=True))
        except KeyboardInterrupt:
            pass
        return 0
    if a.flows < 1 or a.size < 1:
        ap.error("--flows and --size must be at least 1")
    if a.wait_go:
        # blocked before connecting: once the runner sees the connection, its signal can only be waited for
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    go = (lambda: signal.sigwait({signal.SIGUSR1})) if a.wait_go else None
    try:
        transfers = send(a.to, a.port, a.flows, a.size, a.idle, a.duration, a.cc, a.grace, a.first_flow,
                         a.cport, go)
    except OSError as e:
        print(f"filexfer: {a.to}:{a.port}: {e}", file=sys.stderr)
        return 1
    write_csv(a.out, transfers)
    return 0 if transfers and all(t.completion_s is not None for t in transfers) else 1


if __name__ == "__main__":
    sys.exit(main())
