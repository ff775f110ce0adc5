"""What every workload is: the spec's `workload:` section of a flow (a pydantic model whose `kind` names it), the
programs its flows run, how to tell they are ready, and what their own output says once they are done.

A Flow is one workload placed on a sender -> receiver pair of a point. Flow i uses server port 5201+i on its
receiver and client port 20001+i on its sender (ccrig.ports), whatever its kind, so the TCP_INFO sampler finds its
socket by (local port, remote port) and the interval code sees no difference between kinds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ccrig.analysis.intervals import FlowSeries, flow_interval
from ccrig.ports import CLIENT_PORT, SERVER_PORT
from ccrig.topologies.testbed import Testbed



class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    # the program's name in messages ("iperf3 client of flow 2 did not finish")
    program: ClassVar[str] = ""
    # what the program writes to the archive (stdout of the sender), formatted with the flow's index
    output: ClassVar[str] = ""
    # the argv runs through the node's Python (Testbed.python) instead of as it is
    script: ClassVar[bool] = False
    # the sender's extra argv words that make it connect and wait for SIGUSR1 before sending, so a slow start
    # (Python in a guest under TCG) is over before the flow's start time; empty: started at its start time
    wait_go: ClassVar[tuple[str, ...]] = ()
    # what the receiver writes to the archive (its stdout), formatted with the flow's index; "": nothing kept
    server_output: ClassVar[str] = ""
    # the flow is a TCP connection the TCP_INFO sampler measures; False (UDP): its receiver prints the
    # sampler's lines itself into server_output, and the runner reads those instead (collectors.ReceiverLog)
    tcp_info: ClassVar[bool] = True
    # the sender's transport has a congestion control (a flow's `cc`); False (UDP): it has none, and says "none"
    congestion_control: ClassVar[bool] = True
    # every number of the flow comes from its sockets' counters and the program's own report only cross-checks
    # them: a client the path holds in backoff past its time is stopped and the flow kept (Traffic.wait)
    report_optional: ClassVar[bool] = False

    # --- the programs -----------------------------------------------------------------------------------
    def server_argv(self, flow: Flow, bind: str) -> list[str]:
        """The receiver's program, listening on flow.server_port at address bind."""
        raise NotImplementedError

    def client_argv(self, flow: Flow, server: str) -> list[str]:
        """The sender's program: from flow.client_port to server:flow.server_port, congestion control flow.cc,
        for flow.duration seconds; it writes its output to standard output."""
        raise NotImplementedError

    # --- readiness ------------------------------------------------------------------------------------
    # ss's flag for the transport of this kind's sockets: its servers listening and its senders connected are
    # found by port in one ss per node (traffic.py), whatever the number of flows
    transport: ClassVar[str] = "t"

    def opening(self, testbed: Testbed, flow: Flow) -> bool:
        """Whether the flow's TCP connection is still opening (SYN-SENT): its handshake meeting the path's loss."""
        return flow.client_port in local_ports(testbed, flow.sender, ["-t", "state", "syn-sent"])

    def connection(self, testbed: Testbed, flow: Flow) -> Socket | None:
        """The flow's connection as the kernel holds it, in any connected state (None without one). A client
        whose time is up closes with data still unacked and backs off in FIN-WAIT-1 or CLOSING."""
        out = testbed.run(flow.sender, ["ss", "-Htni", "state", "connected", "sport", "=", f":{flow.client_port}"],
                          check=False).stdout
        return next(iter(sockets(out)), None)

    def client_connections(self, testbed: Testbed, flow: Flow) -> str:
        """Every connection of the flow's sender to its server's port, each with its local port: a program's
        control connection beside its data's (iperf3 reports and ends over the former); "none" without one."""
        out = testbed.run(flow.sender, ["ss", "-Htni", "state", "connected", "dport", "=", f":{flow.server_port}"],
                          check=False).stdout
        return "; ".join(str(s) for s in sockets(out)) or "none"

    # --- measurement ---------------------------------------------------------------------------------
    def interval(self, series: FlowSeries, a: float, b: float, share: float) -> dict:
        """The flow's metrics over [a, b] from its sender's counters (a UDP kind: its receiver's), share its
        fair share (analysis/intervals.py)."""
        return flow_interval(series, a, b, share)

    # --- results --------------------------------------------------------------------------------------
    def result(self, flow: Flow, out_dir: Path) -> Any:
        """What the flow's program wrote (out_dir / flow.output_name), read once it has ended; raises RunError
        with the program's own words when it failed."""
        raise NotImplementedError

    def on_periods(self, result: Any) -> list[tuple[float, float]] | None:
        """When the source was on, as (start, end) on the node's wall clock, for a source that is on and off by
        a schedule of its own (onoff); None for the others. A run's intervals are then judged by phase
        (summary.by_phase)."""
        return None

    def received_bytes(self, flow: Flow, result: Any) -> int | None:
        """The bytes the receiver got as the program itself counts them, cross-checked against the kernel's
        counters (None: the program keeps no such count)."""
        return None

    @classmethod
    def summary(cls, flows: list[Flow], results: dict[int, Any]) -> dict:
        """What this kind adds to a repetition's entry in summary.json, over its flows of the repetition
        (results by flow index); nothing by default."""
        return {}


def sockets(out: str) -> list[Socket]:
    """Each socket of `ss -Htni` output (a line of its own, then an indented line of TCP_INFO)."""
    found = []
    for block in re.split(r"\n(?=\S)", out.strip()) if out.strip() else []:
        words = block.split()
        port = words[3].rsplit(":", 1)[-1] if len(words) > 3 else ""
        found.append(Socket(words[0], int(port) if port.isdigit() else None,
                            dict(re.findall(r"\b(backoff|rto|bytes_acked|unacked|notsent|cwnd|lastsnd):([\d.]+)",
                                            block))))
    return found


def local_ports(testbed: Testbed, node: str, args: list[str]) -> set[int]:
    """The local ports of the node's sockets that `ss -Hn ARGS` lists (a socket's local address is the first
    address:port of its line, whether or not ss prints the State column)."""
    ports = set()
    for line in testbed.run(node, ["ss", "-Hn", *args], check=False).stdout.splitlines():
        local = next((w for w in line.split() if ":" in w), None)
        if local is not None and local.rsplit(":", 1)[1].isdigit():
            ports.add(int(local.rsplit(":", 1)[1]))
    return ports


@dataclass(frozen=True)
class Socket:
    """A connection as `ss -Htni` shows it: its state, its local port and ss's counters that tell a stalled
    connection from a slow one (backoff, rto, bytes_acked, unacked, notsent, cwnd, lastsnd), as ss writes them."""
    state: str
    port: int | None
    counters: dict[str, str]

    @property
    def bytes_acked(self) -> int:
        return int(self.counters.get("bytes_acked", 0))   # 1: only the SYN (the handshake's sequence number)

    @property
    def notsent(self) -> int:
        """Bytes the program wrote that the socket has not sent yet (ss says none when there are none)."""
        return int(self.counters.get("notsent", 0))

    @property
    def backoff(self) -> Backoff | None:
        """Its retransmission-timeout backoff (ss's `backoff:N`: its retransmissions lost one after another, by
        the path or by a fault that stalled the socket); None if it is not backing off."""
        if "backoff" not in self.counters:
            return None
        rto = self.counters.get("rto")
        return Backoff(int(self.counters["backoff"]), None if rto is None else float(rto), self.bytes_acked)

    def __str__(self) -> str:
        port = [] if self.port is None else [f":{self.port}"]
        return " ".join([self.state, *port, *(f"{k}:{v}" for k, v in self.counters.items())])


@dataclass(frozen=True)
class Backoff:
    """A connection in retransmission-timeout backoff as ss shows it (Socket.backoff)."""
    backoff: int                # retransmission timeouts in a row
    rto_ms: float | None
    bytes_acked: int            # 1: only the SYN was acknowledged (the handshake's sequence number)

    def __str__(self) -> str:
        return f"backoff {self.backoff}, rto {'?' if self.rto_ms is None else f'{self.rto_ms:g}'} ms, " \
               f"{self.bytes_acked} bytes acked"


@dataclass
class Flow:
    """One flow of a point: a workload on a sender -> receiver pair, with its congestion control."""
    workload: Workload
    index: int
    cc: str            # the kernel's name of the congestion control on the sender (iperf3 -C, TCP_CONGESTION)
    label: str         # the congestion control as the spec says it (a name, or law(parameters))
    sender: str
    receiver: str
    start: float       # seconds after the point's traffic starts
    duration: float    # seconds of sending
    name: str = ""     # the spec's `label` of the flow (what figures call it), if it has one
    seed: int | None = None   # its random times' seed (schedule.flow_seed); None: the source draws its own

    @property
    def seed_argv(self) -> list[str]:
        """sources.py's --seed, when the flow has one: the same run seed replays the same times."""
        return [] if self.seed is None else ["--seed", str(self.seed)]

    @property
    def server_port(self) -> int:
        return SERVER_PORT + self.index

    @property
    def client_port(self) -> int:
        return CLIENT_PORT + self.index

    # the sampler's match keys: (local port, remote port) on each end
    @property
    def sender_key(self) -> str:
        return f"{self.client_port}:{self.server_port}"

    @property
    def receiver_key(self) -> str:
        return f"{self.server_port}:{self.client_port}"

    @property
    def output_name(self) -> str:
        return self.workload.output.format(index=self.index)

    def server_argv(self, bind: str) -> list[str]:
        return self.workload.server_argv(self, bind)

    def client_argv(self, server: str) -> list[str]:
        return self.workload.client_argv(self, server)

