#!/usr/bin/env python3
"""One short TCP connection per route, every namespace of a machine from ONE process, so the kernel's TCP metrics
cache holds each route's locked cwnd before the flows start (experiments/run/sender_tcp.py: _warm).

    warm.py PORT SRC_NS,DST_NS,DST_ADDR ...

SRC_NS and DST_NS are paths that enter a namespace (/run/netns/NAME). A socket made while the process sits in a
namespace (setns there, socket(), setns back) stays bound to it: one listener per receiver address, one client per
route, each connected once. The clients close first, so each passes through TIME_WAIT, where the kernel saves
the route's metrics entry. One Python start instead of two per route: each costs seconds in an emulated guest.
Exit status 0 when every connection was made; otherwise a line on stderr says which was not."""
import os
import socket
import sys

from sampler import _setns, socket_in

TIMEOUT = 30


def main(argv: list) -> int:
    port, routes = int(argv[0]), [a.split(",") for a in argv[1:]]
    setns, home = _setns(), os.open("/proc/self/ns/net", os.O_RDONLY)
    listeners, clients, accepted = {}, [], []
    try:
        for _, dst, addr in routes:
            if addr not in listeners:
                s = listeners[addr] = socket_in(dst, setns, home)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((addr, port))
                s.listen(len(routes))
                s.settimeout(TIMEOUT)
        for src, dst, addr in routes:
            c = socket_in(src, setns, home)
            clients.append(c)
            c.settimeout(TIMEOUT)
            try:
                c.connect((addr, port))
            except OSError as e:
                print(f"warm.py: no connection from {src} to {addr}:{port} in {dst}: {e}", file=sys.stderr)
                return 1
        for _, _, addr in routes:
            accepted.append(listeners[addr].accept()[0])
        for c in clients:
            c.close()
        for a in accepted:   # the client's FIN, then ours: the client's socket goes to TIME_WAIT
            a.settimeout(TIMEOUT)
            a.recv(1)
            a.close()
        return 0
    finally:
        for s in [*clients, *accepted, *listeners.values()]:
            s.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
