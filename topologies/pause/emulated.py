"""PAUSE on emulated links, the runner's side: EmulatedPause starts the PAUSE program (topologies/pause/agent:
the XOFF/XON controller loop that watches node 2's queue and shapes node 1's link B, and node 1's agent where
node 1 is another machine), reads its messages, and stops it; agent_zip packs that program for hosts.

    node 1 ──tbf μ1 / μ2 ─▶ node 2 ──(htb ν, pfifo B2)─▶ ...
      ▲                        │
      └─── change_tbf ◀── controller ◀── qlen of B2 (RTM_GETQDISC)

Where the nodes are namespaces of this machine (netns, the vm guest) the controller runs here (Here); where they
are separate machines (hosts) it runs on node 2's host and the agent on node 1's, both from the zip the testbed
copies there (OnTestbed). Every event goes to events.csv; stats() has the totals, prometheus_samples() their
series.
"""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import threading
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ccrig.errors
from ccrig.commands import Commands, Local, Node
from ccrig.errors import RunError
from ccrig.procs import stop_group
from ccrig.samples import Sample
from ccrig.threads import Thread
from . import agent
from .agent.config import EmulatedPauseConfig

EVENT_FIELDS = ["t", "event", "occupancy", "rate_bps", "latency_s", "actuate_s"]


@dataclass
class PauseStats:
    xoff: int = 0
    xon: int = 0
    refreshes: int = 0
    expiries: int = 0
    paused_s: float = 0.0
    paused: bool = False
    polls: int = 0
    max_occupancy: int = 0
    elapsed_s: float = 0.0
    longest_gap_s: float = 0.0                              # the controller's longest time between two looks
    cpu_s: float = 0.0                                      # its CPU time
    latency_s: list[float] = field(default_factory=list)   # one per rate change
    actuate_s: list[float] = field(default_factory=list)
    agent_signals: int | None = None                       # a remote node 1's agent: datagrams from node 2,
    agent_foreign: int = 0                                 # datagrams from elsewhere (ignored),
    agent_apply_s: list[float] = field(default_factory=list)   # and its time from datagram to tbf in force


AGENT_DIR = Path(agent.__file__).parent
# The program on a machine without ccrig: every module of agent/ (standard library only) and ccrig/errors.py,
# under empty package markers, since the other packages' own __init__ import the spec models (pydantic). The
# module's place in the zip (its import name) -> its file here.
AGENT_MODULES = {**{f"ccrig/topologies/pause/agent/{p.name}": p for p in sorted(AGENT_DIR.glob("*.py"))},
                 "ccrig/errors.py": Path(ccrig.errors.__file__)}


def agent_zip(path: Path) -> Path:
    """Writes the controller and node 1's agent as one zip Python runs (`python3 agent.pyz ...`); the same
    bytes every time (fixed dates), so runs of one ccrig version ship identical programs."""
    files = {f"{pkg}/__init__.py": "" for pkg in ("ccrig", "ccrig/topologies", "ccrig/topologies/pause")}
    files.update({name: src.read_text() for name, src in AGENT_MODULES.items()})
    files["__main__.py"] = f"import sys\nfrom {agent.__name__}.main import main\nsys.exit(main(sys.argv[1:]))\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
    return path


class Here:
    """Node 1 and node 2 are network namespaces of this machine (netns, the vm guest): the controller runs
    here and reaches both through the namespaces its config names."""
    remote = False

    def __init__(self, commands: Commands, cfg: EmulatedPauseConfig):
        self.commands = commands
        self.up: Node = Local(commands, cfg.up_ns)   # node 1, where link B's tbf is

    def popen(self, role: str, args: list[str]) -> subprocess.Popen:
        return self.commands.popen([sys.executable, "-m", agent.__name__, *args],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def end(self, role: str, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)


class OnTestbed:
    """Node 1 and node 2 are machines of a testbed (hosts): the controller runs on node 2's, node 1's tc and
    its agent on node 1's, both from the agent zip (program) the testbed copies there."""
    remote = True

    def __init__(self, testbed, node1: str, node2: str, program: Path):
        self.testbed, self.program = testbed, program
        self.nodes = {"agent": node1, "controller": node2}
        self.up: Node = testbed.node(node1)

    def popen(self, role: str, args: list[str]) -> subprocess.Popen:
        node = self.nodes[role]
        argv = [*self.testbed.python(node), self.testbed.stage(node, self.program), *args]
        return self.testbed.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def end(self, role: str, proc: subprocess.Popen) -> None:
        self.testbed.end(self.nodes[role], proc)


class EmulatedPause:
    """The emulated PAUSE controller of one link, for the runner: start() before traffic, stop() after
    (always, also on errors: it restores link B to μ1 and never raises), stats() at any time.

    start() replaces node 1's shaper on link B by tbf at μ1 over a pfifo of B1 (on node 1's Node, so it is
    in commands.log) and starts the controller process (and, where node 1 is another machine, its agent
    first). events_csv, if given, receives every event. where: Here (default) or OnTestbed.
    """

    def __init__(self, cfg: EmulatedPauseConfig, commands: Commands, events_csv: Path | None = None,
                 where: Here | OnTestbed | None = None):
        self.cfg, self.commands, self.events_csv = cfg, commands, events_csv
        self.where = where or Here(commands, cfg)
        self.proc: subprocess.Popen | None = None
        self.agent: subprocess.Popen | None = None
        self._stats = PauseStats()
        self._lock = threading.Lock()
        self._readers: list[Thread] = []
        self._ready = threading.Event()
        self._agent_ready = threading.Event()
        self._agent_port: int | None = None
        self._error: str | None = None
        self._diag: list[str] = []   # what the processes printed that is not a message (a traceback)
        self._csv = None

    # lifecycle
    def start(self, timeout: float = 60.0) -> None:
        """Installs the actuator and starts the controller; returns once it polls. The timeout is generous
        because a guest under TCG (the vm testbed) takes seconds to start Python."""
        cfg = self.cfg
        if cfg.actuator == "tbf":
            self._run_up(["tc", "qdisc", "del", "dev", cfg.up_dev, "root"], check=False)
            for argv in cfg.tbf_argv(cfg.rate_bps):
                self._run_up(argv)
        if self.events_csv is not None:
            self.events_csv.parent.mkdir(parents=True, exist_ok=True)
            self._csv = open(self.events_csv, "w", newline="")
            csv.writer(self._csv).writerow(EVENT_FIELDS)
        if cfg.actuator == "tbf" and self.where.remote:
            self.agent = self.where.popen("agent", ["obey", json.dumps(asdict(cfg))])
            self._follow(self.agent, "pause-agent", self._agent_ready)
            if not self._agent_ready.wait(timeout) or self._error:
                self._fail("node 1's agent", f"{cfg.up_dev}, rates signalled to {cfg.signal_to}", timeout)
            cfg = EmulatedPauseConfig(**{**asdict(cfg), "signal_port": self._agent_port})
        self.proc = self.where.popen("controller", [json.dumps(asdict(cfg))])
        self._follow(self.proc, "pause-reader", self._ready)
        if not self._ready.wait(timeout) or self._error:
            self._fail("PAUSE controller", f"watching {cfg.down_dev}"
                       + (f" in {cfg.down_ns}" if cfg.down_ns else "") + f", qdisc {cfg.down_handle}", timeout)

    def _run_up(self, argv: list[str], check: bool = True) -> None:
        """Runs argv on node 1, where link B's tbf is; check False: best effort (the node may be gone)."""
        try:
            self.where.up.run(argv, check=check)
        except RunError:
            if check:
                raise

    def _fail(self, who: str, what: str, timeout: float) -> None:
        said = f"; it said: {self._diag[-1]}" if self._diag else ""
        err = self._error or f"no answer within {timeout:g} s{said}"
        self.stop()
        raise RunError(f"{who} ({what}) failed to start: {err}")

    def _follow(self, proc: subprocess.Popen, name: str, ready: threading.Event) -> None:
        """Reads proc's messages in a thread; ready is set when it is, or when it ended without being so."""
        t = Thread(self._read, (proc, ready), name=name)
        self._readers.append(t)

    def stop(self) -> PauseStats:
        # the controller first (its last act signals μ1), then node 1's agent (which sets μ1 as it ends)
        for role, proc in (("controller", self.proc), ("agent", self.agent)):
            if proc is None or proc.poll() is not None:
                continue
            try:
                self.where.end(role, proc)   # asked its way, so its last words (the totals) still come back
                proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, RunError, OSError):
                stop_group(proc)
        for t in self._readers:
            t.join(timeout=5)
        # whatever happened to the processes, link B runs at μ1 again (the namespace may be gone already)
        cfg = self.cfg
        if cfg.actuator == "tbf":
            self._run_up(cfg.tbf_argv(cfg.rate_bps, verb="change")[0], check=False)
        if self._csv is not None:
            self._csv.close()
            self._csv = None
        return self.stats()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stats(self) -> PauseStats:
        with self._lock:
            s = self._stats
            return PauseStats(**{**asdict(s), "latency_s": list(s.latency_s), "actuate_s": list(s.actuate_s),
                                 "agent_apply_s": list(s.agent_apply_s)})

    def _read(self, proc: subprocess.Popen, ready: threading.Event) -> None:
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                if line.strip():
                    self._diag = (self._diag + [line.decode(errors="replace").strip()])[-20:]
                continue
            if "error" in msg:
                self._error = msg["error"]
                ready.set()
            elif "ready" in msg:
                self._agent_port = msg.get("port")
                ready.set()
            elif "agent" in msg:
                with self._lock:
                    self._stats.agent_signals = msg["agent"]["signals"]
                    self._stats.agent_foreign = msg["agent"]["foreign"]
                    self._stats.agent_apply_s = msg["agent"]["apply_s"]
            elif "status" in msg or "final" in msg:
                with self._lock:
                    for k, v in (msg.get("status") or msg.get("final")).items():
                        setattr(self._stats, k, v)
            else:
                with self._lock:
                    if msg["latency_s"] is not None:
                        self._stats.latency_s.append(msg["latency_s"])
                        self._stats.actuate_s.append(msg["actuate_s"])
                    if self._csv is not None:
                        csv.writer(self._csv).writerow([msg.get(k) for k in EVENT_FIELDS])
        ready.set()


# --- Prometheus ------------------------------------------------------------------------------------------

# name (without ccrig_) -> (type, help), to merge into experiments.exporter.HELP
PAUSE_HELP = {
    "pause_xoff_total": ("counter", "XOFF events: node 2's queue rose above the high threshold T1"),
    "pause_xon_total": ("counter", "XON events: node 2's queue fell below the low threshold T2"),
    "pause_refresh_total": ("counter", "XOFF refreshes while congested (802.3x pause-time mode)"),
    "pause_expiry_total": ("counter", "Pauses that ran out before a refresh or XON (802.3x pause-time mode)"),
    "pause_paused_seconds_total": ("counter", "Time the upstream transmitter spent paused"),
    "pause_paused": ("gauge", "1 while the upstream transmitter is paused"),
    "pause_reaction_seconds": ("gauge", "Threshold crossing to rate change in force (upper bound) over the "
                                        "reactions so far: stat is p50, p90, p99 or max"),
}
# a gauge may not carry a `quantile` label (promtool: only summaries do), so the statistic is named by `stat`
STATS = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))


def prometheus_samples(stats: PauseStats, labels: dict, ts: float | None = None) -> list:
    """The controller's statistics as experiments.exporter Samples (labels: experiment, run, point, rep, node,
    dev as the runner sets them)."""
    out = [Sample("pause_xoff_total", labels, stats.xoff, ts), Sample("pause_xon_total", labels, stats.xon, ts),
           Sample("pause_refresh_total", labels, stats.refreshes, ts),
           Sample("pause_expiry_total", labels, stats.expiries, ts),
           Sample("pause_paused_seconds_total", labels, stats.paused_s, ts),
           Sample("pause_paused", labels, 1.0 if stats.paused else 0.0, ts)]
    lat = sorted(stats.latency_s)
    if lat:
        for stat, q in STATS:
            out.append(Sample("pause_reaction_seconds", {**labels, "stat": stat},
                              lat[min(len(lat) - 1, int(q * len(lat)))], ts))
    return out
