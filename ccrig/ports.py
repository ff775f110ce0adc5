"""The ports of flow i: its server listens on SERVER_PORT + i, its client binds CLIENT_PORT + i; together they
name the flow's socket at each end (the sampler's keys).

The client ports lie below Linux's ephemeral range (32768-60999 by default): a client bound to a fixed port
inside it collides now and then with a port the kernel gave some other connect() on the sender (iperf3's own
control connection, whose port the kernel prefers even), and iperf3 fails "unable to connect stream: Address
already in use" (seen once in CI on the hosts testbed with 40002). A lab host whose range reaches down to them
is refused before set-up (client_port_problem).
"""
from __future__ import annotations

from .fields import MAX_FLOWS

SERVER_PORT = 5201
CLIENT_PORT = 20001
CLIENT_PORTS = range(CLIENT_PORT, CLIENT_PORT + MAX_FLOWS)


def _ranges(text: str) -> list[range]:
    """"1024-2000,3000" (ip_local_reserved_ports) or "32768\\t60999" (ip_local_port_range) as ranges."""
    out = []
    for part in text.replace("\t", "-").replace(" ", "-").split(","):
        bounds = [int(x) for x in part.split("-") if x.strip()]
        if bounds:
            out.append(range(bounds[0], bounds[-1] + 1))
    return out


def client_port_problem(where: str, port_range: str, reserved: str) -> str | None:
    """None when no client port can be handed to another connection by the kernel: the machine's ephemeral
    range (net.ipv4.ip_local_port_range) misses them, or ip_local_reserved_ports keeps the ones it holds."""
    [ephemeral] = _ranges(port_range.strip()) or [range(0)]
    kept = _ranges(reserved.strip())
    exposed = [p for p in CLIENT_PORTS if p in ephemeral and not any(p in r for r in kept)]
    if not exposed:
        return None
    first, last = CLIENT_PORTS[0], CLIENT_PORTS[-1]
    return (f"{where}: net.ipv4.ip_local_port_range is {ephemeral.start}-{ephemeral.stop - 1}, which holds ccrig's "
            f"client ports {first}-{last} (the kernel may give one to another connection); expected a range "
            f"above {last} such as Linux's default 32768-60999, or keep them: "
            f"sysctl -w net.ipv4.ip_local_reserved_ports={first}-{last}")
