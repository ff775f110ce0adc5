"""Workloads: the traffic of a point. A bulk flow is one iperf3 client -> server pair with its own congestion
control (`-C`), its data connection pinned to a known client port so the sampler can find its socket.

Flow i uses server port 5201+i on its receiver and client port 40001+i on its sender; the iperf3 JSON of the
client (which carries the receiver's totals too) is kept in the archive. A files flow (FilesFlow: finite files
with idle time, experiments/filexfer.py) uses the same ports and keeps transfers-<flow>.csv instead.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ccrig.topologies.testbed import Testbed
from ccrig.errors import RunError

SERVER_PORT = 5201
CLIENT_PORT = 40001
FILEXFER = Path(__file__).with_name("filexfer.py")


@dataclass
class BulkFlow:
    index: int
    cc: str            # the kernel name passed to iperf3 -C
    label: str         # the congestion control as the spec says it (a name, or law(parameters))
    sender: str
    receiver: str
    start: float       # seconds after the point's traffic starts
    duration: float    # seconds of sending

    @property
    def server_port(self) -> int:
        return SERVER_PORT + self.index

    @property
    def client_port(self) -> int:
        return CLIENT_PORT + self.index

    def server_argv(self, bind: str) -> list[str]:
        return ["iperf3", "--server", "--one-off", "--bind", bind, "--port", str(self.server_port)]

    def client_argv(self, server: str) -> list[str]:
        return ["iperf3", "--client", server, "--port", str(self.server_port), "--cport", str(self.client_port),
                "--time", str(math.ceil(self.duration)), "--congestion", self.cc, "--json",
                "--interval", "1"]

    # the sampler's match keys: (local port, remote port) on each end
    @property
    def sender_key(self) -> str:
        return f"{self.client_port}:{self.server_port}"

    @property
    def receiver_key(self) -> str:
        return f"{self.server_port}:{self.client_port}"

    kind = "bulk"
    script = False      # argv runs as is (not through the node's Python)

    @property
    def output_name(self) -> str:
        return f"iperf3-{self.index}.json"


@dataclass
class FilesFlow(BulkFlow):
    """A finite-file flow (experiments/filexfer.py): sends `size` bytes, waits `idle` seconds, repeats, over one
    connection pinned to the same ports as a bulk flow's, so the sampler and the interval code see no difference.
    Each transfer's completion time goes to transfers-<flow>.csv in the archive."""
    size: int = 0      # bytes per file
    idle: float = 0.0  # seconds between the end of one transfer and the start of the next

    kind = "files"
    script = True       # runs through the node's Python (Testbed.python)

    @property
    def output_name(self) -> str:
        return f"transfers-{self.index}.csv"

    def server_argv(self, bind: str) -> list[str]:
        return [str(FILEXFER), "serve", "--bind", bind, "--port", str(self.server_port)]

    def client_argv(self, server: str) -> list[str]:
        return [str(FILEXFER), "send", "--to", server, "--port", str(self.server_port),
                "--cport", str(self.client_port), "--flows", "1", "--first-flow", str(self.index),
                "--size", f"{self.size}b", "--idle", f"{self.idle:g}s", "--duration", f"{self.duration:g}s",
                "--cc", self.cc, "--out", "-"]


def make_flow(workload, *args, **kw) -> BulkFlow:
    """The flow a spec's workload asks for (experiments.spec Bulk or Files); arguments as BulkFlow's."""
    if getattr(workload, "kind", "bulk") == "files":
        return FilesFlow(*args, **kw, size=workload.size.bytes, idle=workload.idle)
    return BulkFlow(*args, **kw)


class Traffic:
    """Starts and stops a point's flows on a testbed."""

    def __init__(self, testbed: Testbed, flows: list[BulkFlow], out_dir: Path):
        self.testbed, self.flows, self.out_dir = testbed, flows, out_dir
        self.servers: list[subprocess.Popen] = []
        self.clients: dict[int, subprocess.Popen] = {}
        self.parked: set[int] = set()   # files flows whose sender is connected and waits for its start
        self._files = []

    def start_servers(self, timeout: float = 10) -> None:
        if any(f.script for f in self.flows):
            timeout = max(timeout, 60)   # a Python server takes seconds to start in a guest under TCG (vm)
        for f in self.flows:
            self.servers.append(self.testbed.popen(f.receiver, self._argv(f.receiver, f, f.server_argv(
                self.testbed.address(f.receiver)))))
        deadline = time.monotonic() + timeout
        for f in self.flows:
            # listening? (ss filter on the local port); the server may need a moment to bind
            while True:
                out = self.testbed.run(f.receiver, ["ss", "-Hltn", f"sport = :{f.server_port}"], check=False).stdout
                if out.strip():
                    break
                if time.monotonic() > deadline:
                    raise RunError(f"iperf3 server for flow {f.index} did not listen on {f.receiver}:"
                                   f"{f.server_port} within {timeout:g} s")
                time.sleep(0.05)
        self._park_clients(timeout)

    def _park_clients(self, timeout: float) -> None:
        """Starts the files flows' senders ahead of time, where a signal reaches them: a Python start takes
        seconds in a guest under TCG (vm), 8 of them at once over 10 s, so started at the flow's start time
        they would begin late (past the measured intervals). Parked, each connects and waits (--wait-go);
        start_client() then only sends the signal. (On the hosts testbed the popen is the local ssh client,
        which a signal would end, and the remote Python starts at native speed: started on time as before.)"""
        if not self.testbed.signals_reach_popen:
            return
        for f in self.flows:
            if f.script:
                self.clients[f.index] = self._launch(f, ["--wait-go"])
        deadline = time.monotonic() + timeout
        for f in self.flows:
            if not f.script:
                continue
            while True:
                out = self.testbed.run(f.sender, ["ss", "-Htn", "state", "established",
                                                  f"sport = :{f.client_port}"], check=False).stdout
                if out.strip():
                    self.parked.add(f.index)
                    break
                if self.clients[f.index].poll() is not None or time.monotonic() > deadline:
                    text = (self.out_dir / f.output_name).read_text().strip()
                    raise RunError(f"files flow {f.index} did not connect from {f.sender} to {f.receiver}:"
                                   f"{f.server_port} within {timeout:g} s: {text[:200] or 'no output'}")
                time.sleep(0.05)

    def _launch(self, f: BulkFlow, extra: list[str] = ()) -> subprocess.Popen:
        out = open(self.out_dir / f.output_name, "w")
        self._files.append(out)
        return self.testbed.popen(f.sender, self._argv(f.sender, f, [*f.client_argv(
            self.testbed.address(f.receiver)), *extra]), stdout=out, stderr=subprocess.STDOUT)

    def start_client(self, f: BulkFlow) -> None:
        if f.index in self.parked:
            os.kill(self.clients[f.index].pid, signal.SIGUSR1)   # connected and waiting: go
            return
        self.clients[f.index] = self._launch(f)

    def _argv(self, node: str, f: BulkFlow, argv: list[str]) -> list[str]:
        # -S: the script is standard library only, and skipping site (the environment's .pth files, read over
        # 9p in a vm guest) saves about a second per start on an emulated CPU, 16 starts per files point
        return [*self.testbed.python(node), "-S", *argv] if f.script else argv

    def running(self) -> bool:
        return any(p.poll() is None for p in self.clients.values())

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for i, p in self.clients.items():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RunError(f"iperf3 client of flow {i} did not finish within {timeout:g} s") from None

    def stop(self) -> None:
        """Ends every process this point started (clients first, then servers). Never raises."""
        for p in [*self.clients.values(), *self.servers]:
            stop_process(p)
        for fh in self._files:
            fh.close()

    def results(self) -> dict[int, dict]:
        """Each flow's iperf3 JSON; a flow whose client failed raises with iperf3's own error."""
        out = {}
        for f in self.flows:
            if f.kind != "bulk":
                continue   # files flows have no iperf3: transfers() has theirs
            text = (self.out_dir / f"iperf3-{f.index}.json").read_text()
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                raise RunError(f"iperf3 client of flow {f.index} wrote no JSON: {text.strip()[:200]}") from None
            if "error" in data:
                raise RunError(f"iperf3 flow {f.index} ({f.sender} -> {f.receiver}, cc {f.cc}): {data['error']}")
            out[f.index] = data
        return out


def stop_process(p: subprocess.Popen, grace: float = 2.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after grace seconds."""
    import os
    import signal
    if p.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def transfers(flows: list[BulkFlow], out_dir: Path) -> dict | None:
    """The files flows' transfers (None when there are none): per flow the count, the completed ones and their
    completion times (mean, median, max), read back from transfers-<flow>.csv."""
    import statistics
    from .filexfer import FIELDS, read_csv
    files = [f for f in flows if f.kind == "files"]
    if not files:
        return None
    out = []
    for f in files:
        path = out_dir / f.output_name
        text = path.read_text()
        if not text.startswith(",".join(FIELDS)):
            raise RunError(f"files flow {f.index} ({f.sender} -> {f.receiver}) failed: {text.strip()[:200]}")
        done = [t.completion_s for t in read_csv(path) if t.completion_s is not None]
        n = len(text.strip().splitlines()) - 1
        out.append({"flow": f.index, "size_bytes": f.size, "idle_s": f.idle, "transfers": n, "completed": len(done),
                    "completion_s": {"mean": statistics.fmean(done) if done else None,
                                     "median": statistics.median(done) if done else None,
                                     "max": max(done, default=None)}})
    return {"flows": out, "completed": sum(e["completed"] for e in out), "transfers": sum(e["transfers"] for e in out)}
