"""Traffic: a point's flows on a testbed, whatever their kinds: servers first (each listening before any sender
starts), senders parked ahead where their kind asks for it, each started at its time, all stopped at the end."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ccrig import fanout
from ccrig.errors import PathError, RunError
from ccrig.procs import stop_group, waiting_in
from ccrig.topologies.testbed import Testbed
from ccrig.experiments.workloads.base import Flow, Socket, local_ports


class Traffic:
    def __init__(self, testbed: Testbed, flows: list[Flow], out_dir: Path):
        self.testbed, self.flows, self.out_dir = testbed, flows, out_dir
        self.servers: list[subprocess.Popen] = []
        self.clients: dict[int, subprocess.Popen] = {}
        self.parked: set[int] = set()   # flows whose sender is connected and waits for its start
        self.unreported: dict[int, str] = {}   # flows kept without their program's report, and why (wait)
        self._files = []

    def start_servers(self, timeout: float = 10) -> None:
        if any(f.workload.script for f in self.flows):
            timeout = max(timeout, 60)   # a Python server takes seconds to start in a guest under TCG (vm)
        for f in self.flows:
            out = subprocess.DEVNULL
            if f.workload.server_output:   # the receiver's own log (UDP sources, interactive)
                out = open(self.out_dir / f.workload.server_output.format(index=f.index), "w")
                self._files.append(out)
            self.servers.append(self.testbed.popen(f.receiver, self._argv(f.receiver, f, f.server_argv(
                self.testbed.address(f.receiver))), stdout=out))
        # each server may need a moment to bind
        _until_all(self.flows, self._listening, time.monotonic() + timeout,
                   lambda f, late: late and f"{f.workload.program} server for flow {f.index} did not listen on "
                                         f"{f.receiver}:{f.server_port} within {timeout:g} s")
        self._park_clients(timeout)

    def server_of(self, f: Flow) -> subprocess.Popen:
        """The flow's receiver process (started by start_servers)."""
        return self.servers[self.flows.index(f)]

    def _park_clients(self, timeout: float) -> None:
        """Starts ahead of time, where a signal reaches them, the senders whose kind waits for one (wait_go):
        each connects and waits; start_client() then only sends the signal. (On the hosts testbed the popen is
        the local ssh client, which a signal would end, and the remote program starts at native speed: started
        on time as the others.)"""
        if not self.testbed.signals_reach_popen:
            return
        early = [f for f in self.flows if f.workload.wait_go]
        for f in early:
            self.clients[f.index] = self._launch(f, list(f.workload.wait_go))

        def failed(f: Flow, late: bool) -> str | None:
            if self.clients[f.index].poll() is None and not late:
                return None
            text = (self.out_dir / f.output_name).read_text().strip()
            return (f"{f.workload.kind} flow {f.index} did not connect from {f.sender} to {f.receiver}:"
                    f"{f.server_port} within {timeout:g} s: {text[:200] or 'no output'}")
        _until_all(early, self._connected, time.monotonic() + timeout, failed)
        self.parked.update(f.index for f in early)

    def _listening(self, flows: list[Flow]) -> list[bool]:
        """Whether each flow's server accepts connections: one ss per receiver (and transport), side by side."""
        return self._ports_hold(flows, lambda f: (f.receiver, f.workload.transport, "-l"), lambda f: f.server_port)

    def _connected(self, flows: list[Flow]) -> list[bool]:
        """Whether each sender started ahead (wait_go) has connected and waits for its signal."""
        return self._ports_hold(flows, lambda f: (f.sender, f.workload.transport, "state", "established"),
                                lambda f: f.client_port)

    def _ports_hold(self, flows: list[Flow], query, port) -> list[bool]:
        # one ss process per node, not per flow: a process start costs a guest under TCG a good part of a second
        queries = list(dict.fromkeys(query(f) for f in flows))
        found = dict(zip(queries, fanout.each(
            lambda q: local_ports(self.testbed, q[0], [f"-{q[1]}", *q[2:]]), queries)))
        return [port(f) in found[query(f)] for f in flows]

    def _launch(self, f: Flow, extra: list[str] = ()) -> subprocess.Popen:
        out = open(self.out_dir / f.output_name, "w")
        self._files.append(out)
        return self.testbed.popen(f.sender, self._argv(f.sender, f, [*f.client_argv(
            self.testbed.address(f.receiver)), *extra]), stdout=out, stderr=subprocess.STDOUT)

    def start_client(self, f: Flow) -> None:
        if f.index in self.parked:
            os.kill(self.clients[f.index].pid, signal.SIGUSR1)   # connected and waiting: go
            return
        self.clients[f.index] = self._launch(f)

    def _argv(self, node: str, f: Flow, argv: list[str]) -> list[str]:
        # -S: a script is standard library only, and skipping site (the environment's .pth files, read over
        # 9p in a vm guest) saves about a second per start on an emulated CPU, 16 starts per files point
        return [*self.testbed.python(node), "-S", *argv] if f.workload.script else argv

    def running(self) -> bool:
        return any(p.poll() is None for p in self.clients.values())

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        flows = {f.index: f for f in self.flows}
        for i, p in self.clients.items():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                f = flows[i]
                if f.workload.opening(self.testbed, f):   # the kernel's own state: SYNs lost, still retrying
                    raise PathError(f"{f.workload.program} flow {i}'s connection from {f.sender} was still opening "
                                    f"(SYN-SENT) after {timeout:g} s: its handshake met the path's loss") from None
                # the kernel's own state again: its data's retransmissions lost one after another (study 001 at
                # PER 0.4, 500 ms RTT: 7 retransmissions, 0 bytes acked, the client still waiting at 60 s), so the
                # repetition is the path's to refuse and runs again, as a lost handshake's does (runner, reruns)
                conn = f.workload.connection(self.testbed, f)
                why = _starved(conn) if f.workload.report_optional else None
                if why:
                    # its data flowed, and the path's loss starves it still (study 001 at PER 0.4: a flow in backoff
                    # 5-6, 17 KB acknowledged in 70 s; or 29 KB in 130 s at cwnd 2) while its client has not ended
                    # (iperf3 3.12 had not even begun to end: its control connection silent since the parameters).
                    # Every interval was sampled by now: that is the law under that loss, measured by the sockets'
                    # counters like any flow's, and running the repetition again would keep only the repetitions
                    # in which no flow starved. The client is stopped; only its report (a cross-check) is missing
                    held = self._holding(f, p)   # what held it, before it is stopped (the cause is not known yet)
                    stop_group(p)
                    self.unreported[i] = (f"{f.workload.program} client had not finished within {timeout:g} s, its "
                                          f"connection {why}: stopped; the flow's numbers are its sockets' "
                                          f"counters, without the program's report ({held})")
                    continue
                stalled = conn.backoff if conn is not None else None
                if stalled:   # its first data never got through (or no counters to measure it): as a lost SYN
                    raise PathError(f"{f.workload.program} flow {i}'s connection from {f.sender} was in "
                                    f"retransmission-timeout backoff after {timeout:g} s ({stalled}): its data met "
                                    f"the path's loss, or a fault stalled its socket") from None
                # neither: what the kernel holds of it says why (study 001 run F: a client's reports stopped at 2.7 s
                # of 30, its connection not backing off at 60 s; a drained socket may have gone without data)
                raise RunError(f"{f.workload.program} client of flow {i} did not finish within {timeout:g} s "
                               f"({self._holding(f, p)})") from None

    def _holding(self, f: Flow, p: subprocess.Popen) -> str:
        """What a client past its time waits on: every connection it has to its server's port (a control
        connection's state beside the data's) and where its process sleeps in the kernel. What held study 001's
        clients is not known: every data packet lost from 3 s of 8 did not hold iperf3 3.12 past its time."""
        return (f"its connections to port {f.server_port} (its data's from :{f.client_port}): "
                f"{f.workload.client_connections(self.testbed, f)}; "
                f"its process: {waiting_in(p.pid) or 'ended'}")

    def stop(self) -> None:
        """Ends every process this point started (clients first, then servers). Never raises."""
        for p in [*self.clients.values(), *self.servers]:
            stop_group(p)
        for fh in self._files:
            fh.close()

    def results(self) -> dict[int, Any]:
        """Each flow's result as its workload reads it (Workload.result), by flow index (None: a flow kept
        without its report, `unreported`); a flow whose program failed raises with the program's own words."""
        return {f.index: None if f.index in self.unreported else f.workload.result(f, self.out_dir)
                for f in self.flows}


def _until_all(flows: list[Flow], ready, deadline: float, failed) -> None:
    """Asks ready(flows) (a bool for each) of the flows not yet ready until all are. failed(flow, late) says why a
    flow that is not ready never will be (late: the deadline has passed), or None to ask again; the first such
    reason is raised."""
    pending = list(flows)
    while pending:
        pending = [f for f, ok in zip(pending, ready(pending)) if not ok]
        late = time.monotonic() > deadline
        for f in pending:
            why = failed(f, late)
            if why:
                raise RunError(why)
        if pending:
            time.sleep(0.05)


def _starved(conn: Socket | None) -> str | None:
    """Why a client past its time still has its flow measured, if it does: its data flowed (more than the SYN
    acknowledged) and its socket is still sending what the program wrote, in backoff or holding data not yet sent.
    Data not yet sent now was written before, so the flow was never short of data to send over the measured
    window; a drained socket may have been (a program stuck early), and its repetition fails."""
    if conn is None or conn.bytes_acked <= 1:
        return None
    if (backoff := conn.backoff) is not None:
        return f"in retransmission-timeout backoff ({backoff})"
    if conn.notsent > 0:
        return f"still sending, {conn.notsent} bytes the client wrote not yet sent ({conn})"
    return None
