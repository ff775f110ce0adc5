"""PAUSE on emulated links: an XOFF/XON controller that watches node 2's queue and shapes node 1's link.

    node 1 ──tbf μ1 / μ2 ─▶ node 2 ──(htb ν, pfifo B2)─▶ ...
      ▲                        │
      └─── change_tbf ◀── controller ◀── qlen of B2 (RTM_GETQDISC)

The actuator is tbf, not htb: tbf refills its bucket on every change, so a packet sent slowly during a pause
leaves no debt behind, while htb charges it at the slow rate and keeps the class silent long after the XON.
With μ2 = 0 the rate becomes 1 byte/s: a bucket of one packet lets the frame whose service had begun go (as
an 802.3x sender finishes the frame on the wire) and then nothing more until XON. Arrivals keep queueing in
node 1's pfifo (B1) meanwhile.

Speed: the loop runs in its own process (no GIL shared with the runner), at SCHED_FIFO where allowed, with
a 1 µs timer slack, reading the queue on a netlink socket opened once in node 2's namespace and changing the
rate on one opened in node 1's. It sleeps as long as the queue cannot possibly reach the next threshold:
the queue grows at most one packet per 1/μ1 (the link feeding it) and shrinks at most one per 1/ν, so far
from a threshold it polls rarely and near one every `poll` seconds.

Latency of one reaction = the time the change was acknowledged by the kernel (it is then in force) minus
the time of the previous poll, which still saw the other side of the threshold: an upper bound on
"threshold crossing to rate change in effect". Every event goes to events.csv; stats() has the totals.

Across machines (the hosts testbed: node 1 and node 2 are separate hosts) the controller runs on node 2's
host and node 1's tbf is changed by an agent on node 1's host (`obey`), to which the controller signals each
rate change in a UDP datagram sent to node 1's address on link B: the signal crosses link B backwards, as a
PAUSE frame would. There the latency ends when the signal leaves node 2 (as with real frames); the agent's own
time from datagram to tbf change in force is reported beside it (agent_apply_s). Both programs travel to the
hosts as one zip (agent_zip), since the hosts have no ccrig installed.
"""
from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from ccrig.samples import Sample
from .controller import MAX_QUANTA, PauseLink
from .frames import FrameSender
from .rtnl import Rtnl, in_namespace, parse_handle

EVENT_FIELDS = ["t", "event", "occupancy", "rate_bps", "latency_s", "actuate_s"]
STATUS_EVERY = 0.25  # seconds between the child's status lines (live Prometheus values)
RESEND_EVERY = 0.1   # seconds between repeats of the rate in force to a remote agent (a lost XON must not last)


@dataclass
class EmulatedPauseConfig:
    """What the controller process needs; JSON-serialisable so it crosses the process boundary."""
    down_dev: str             # node 2's egress toward the receivers (its queue is B2)
    up_dev: str               # node 1's egress toward node 2 (the pausable link B)
    high: int                 # T1, packets
    low: int                  # T2, packets
    rate_bps: float           # μ1
    paused_bps: float         # μ2 (0 = stop)
    up_limit: int             # B1, packets: node 1's pfifo under tbf
    down_limit: int           # B2, packets (a threshold at or above it can never be crossed)
    departure_pps: float      # ν in packets/s: how fast queue 2 can drain
    wire_bytes: int = 1514    # one full-size packet on the wire (tbf's bucket)
    down_ns: str | None = None
    up_ns: str | None = None
    down_handle: str = "10:"  # the qdisc holding queue 2 (the pfifo leaf under link C's shaper)
    quanta: int | None = None
    refresh: float | None = None
    poll: float = 100e-6      # shortest time between two reads of the queue
    max_sleep: float = 0.01   # longest (keeps stop() and a mis-estimated bound cheap)
    realtime: bool = True
    # tbf: shape node 1's link B (emulated links). frames: send real 802.3x PAUSE frames out of frames_dev
    # (node 2's interface toward node 1, in down_ns) and let node 1's NIC honour them (real NICs)
    actuator: str = "tbf"
    frames_dev: str | None = None
    # tbf on another machine: node 1's address on link B, where its agent (obey) listens for the rates, the
    # agent's port (it reports the one it bound), and node 2's address on link B, the only sender it obeys;
    # None: node 1's tbf is reached here through up_ns
    signal_to: str | None = None
    signal_port: int | None = None
    signal_from: str | None = None

    def __post_init__(self):
        if self.actuator not in ("tbf", "frames"):
            raise InputError(f"pause actuator: got {self.actuator!r}; expected tbf or frames")
        if self.actuator == "frames":
            if not self.frames_dev:
                raise InputError("pause actuator frames: needs frames_dev, node 2's interface toward node 1")
            if self.quanta is None:
                # a NIC resumes when the pause time runs out: ON/OFF signalling is the longest pause, refreshed
                self.quanta = MAX_QUANTA
        if self.rate_bps <= 0:
            raise InputError(f"pause: rate: got {self.rate_bps!r}; expected a positive rate (μ1)")
        if self.paused_bps < 0 or self.paused_bps >= self.rate_bps:
            raise InputError(f"pause.paused_rate: got {self.paused_bps!r} bit/s; expected 0 (stop) up to "
                             f"below the link rate {self.rate_bps:g} bit/s")
        if not 1 <= self.low <= self.high:
            raise InputError(f"pause.low: got {self.low!r}; expected 1 <= T2 <= T1 = {self.high}")
        if self.high > self.down_limit:
            raise InputError(f"pause.high: got {self.high!r}; expected at most the downstream buffer B2 = "
                             f"{self.down_limit} packets")
        if self.signal_to is not None and self.actuator != "tbf":
            raise InputError(f"pause actuator {self.actuator}: signal_to is for tbf on another machine")
        if not 20e-6 <= self.poll <= 0.1:
            raise InputError(f"pause.poll: got {self.poll!r} s; expected 20us to 100ms")

    @property
    def arrival_pps(self) -> float:
        return self.rate_bps / (8 * self.wire_bytes)

    def tbf_argv(self, rate_bps: float, verb: str = "add") -> list[list[str]]:
        """The tc commands that put node 1's link B on tbf at rate_bps over a pfifo of B1 (handles as the htb
        shaper's, 1: and 10:, so statistics readers find the queue where they expect it); verb change: the
        first alone sets the rate of the tbf in place."""
        dev, burst = self.up_dev, str(self.wire_bytes)
        return [["tc", "qdisc", verb, "dev", dev, "root", "handle", "1:", "tbf",
                 "rate", f"{max(8, round(rate_bps))}bit", "burst", burst, "limit", str(self.up_limit * self.wire_bytes)],
                ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo",
                 "limit", str(self.up_limit)]]


# --- the controller process ----------------------------------------------------------------------------

class _Loop:
    def __init__(self, cfg: EmulatedPauseConfig, out):
        self.cfg, self.out = cfg, out
        self.link = PauseLink(cfg.high, cfg.low, cfg.rate_bps, cfg.quanta, cfg.refresh)
        self.down = Rtnl(cfg.down_ns, cfg.down_dev)
        # tbf here (namespaces of this machine) or on node 1's host through its agent (signal_to: tbf only)
        self.up = Rtnl(cfg.up_ns, cfg.up_dev) if cfg.actuator == "tbf" and cfg.signal_to is None else None
        self.signal = RateSignal(cfg.signal_to, cfg.signal_port) if cfg.signal_to is not None else None
        self.frames = None
        if cfg.actuator == "frames":
            with in_namespace(cfg.down_ns):
                self.frames = FrameSender(cfg.frames_dev)
        self.handle = parse_handle(cfg.down_handle)
        self.stop = False
        self.polls = 0
        self.max_occupancy = 0
        self.t0 = time.monotonic()

    def emit(self, obj) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def set_rate(self, bps: float) -> None:
        if self.up is not None:
            self.up.change_tbf(round(bps / 8), self.cfg.wire_bytes, self.cfg.up_limit)
        elif self.signal is not None:
            self.signal.send(bps)

    def read(self) -> int:
        return self.down.qdisc_stats(self.handle).qlen

    def sleep_for(self, now: float, q: int) -> float:
        cfg, link = self.cfg, self.link
        # a shaper may release two packets back to back (a full bucket after idling, tbf's refill on a
        # change), so the first two of the packets needed may come at once
        if link.sender.congested:
            # XON needs q < T2: at least q - T2 + 1 departures
            bound = (q - cfg.low - 1) / cfg.departure_pps
        elif cfg.high >= cfg.down_limit:
            bound = cfg.max_sleep   # T1 = B2: the queue can never exceed T1
        else:
            # XOFF needs q > T1: at least T1 + 1 - q arrivals
            bound = (cfg.high - q - 1) / cfg.arrival_pps
        wait = max(cfg.poll, min(cfg.max_sleep, bound / 2))
        deadline = link.next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        return wait

    def act(self, frame, change: str | None, now: float, q: int, since: float) -> None:
        """Carries out one decision: a rate change on tbf, or the frame itself on the wire."""
        event = "expiry" if frame is None else "xon" if frame.is_xon else "refresh" if frame.refresh else "xoff"
        bps = None if change is None else self.cfg.paused_bps if change == "paused" else self.cfg.rate_bps
        acted = False
        if self.frames is not None and frame is not None:
            self.frames.send_frame(frame)
            acted = True
        elif self.frames is None and change is not None:
            self.set_rate(bps)
            acted = True
        done = time.monotonic()
        self.emit({"t": now - self.t0, "event": event, "occupancy": q, "rate_bps": bps,
                   "latency_s": done - since if acted else None, "actuate_s": done - now if acted else None})

    def run(self) -> None:
        cfg, link = self.cfg, self.link
        self.set_rate(cfg.rate_bps)
        self.emit({"ready": True, "occupancy": self.read()})
        last_poll = time.monotonic()
        last_status = last_poll
        while not self.stop:
            now = time.monotonic()
            q = self.read()
            self.polls += 1
            self.max_occupancy = max(self.max_occupancy, q)
            deadline = link.next_deadline()
            frame, change = link.step(now, q)
            if change is not None or frame is not None:
                # a timer (refresh or expiry) fires at its deadline; a threshold after the previous poll
                since = deadline if frame is None or (frame.refresh and deadline is not None) else last_poll
                self.act(frame, change, now, q, since)
            last_poll = now
            if self.signal is not None:
                self.signal.repeat(now)
            if now - last_status >= STATUS_EVERY:
                last_status = now
                self.emit({"status": self.summary(now)})
            time.sleep(self.sleep_for(now, q))

    def summary(self, now: float) -> dict:
        link = self.link
        return {"xoff": link.xoff, "xon": link.xon, "refreshes": link.refreshes, "expiries": link.expiries,
                "paused": link.paused, "paused_s": link.time_paused(now), "polls": self.polls,
                "max_occupancy": self.max_occupancy, "elapsed_s": now - self.t0}

    def finish(self) -> None:
        now = time.monotonic()
        if self.link.paused:
            self.link.paused = False
            self.link.paused_time += now - self.link.paused_since
        try:
            if self.frames is not None:
                self.frames.send(0)            # never leave node 1's NIC paused
            self.set_rate(self.cfg.rate_bps)   # leave link B running at μ1
        finally:
            self.emit({"final": self.summary(now)})


def _speed_up() -> None:
    """Timer slack 1 ns and SCHED_FIFO where allowed: a 100 µs sleep then lasts ~100 µs, not 150+."""
    import ctypes
    try:
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        pass


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
    _speed_up()
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


def main(argv: list[str]) -> int:
    out = sys.stdout
    if argv and argv[0] == "obey":
        try:
            return obey(EmulatedPauseConfig(**json.loads(argv[1])), out)
        except OSError as e:
            out.write(json.dumps({"error": str(e)}) + "\n")
            out.flush()
            return 2
    cfg = EmulatedPauseConfig(**json.loads(argv[0]))
    try:
        loop = _Loop(cfg, out)
        loop.read()
    except OSError as e:
        out.write(json.dumps({"error": str(e)}) + "\n")
        out.flush()
        return 2
    if cfg.realtime:
        _speed_up()

    def _stop(*_):
        loop.stop = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        loop.run()
    except OSError as e:
        out.write(json.dumps({"error": str(e)}) + "\n")
        return 1
    finally:
        loop.finish()
    return 0


# --- the runner's side ----------------------------------------------------------------------------------

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
    latency_s: list[float] = field(default_factory=list)   # one per rate change
    actuate_s: list[float] = field(default_factory=list)
    agent_signals: int | None = None                       # a remote node 1's agent: datagrams from node 2,
    agent_foreign: int = 0                                 # datagrams from elsewhere (ignored),
    agent_apply_s: list[float] = field(default_factory=list)   # and its time from datagram to tbf in force


# The controller's program on a machine without ccrig: these modules (standard library only) under empty
# package markers, since the packages' own __init__ import the spec models (pydantic). Repository path ->
# the module's place in the zip (its import name).
AGENT_MODULES = {"topologies/pause/emulated.py": "ccrig/topologies/pause/emulated.py",
                 "topologies/pause/controller.py": "ccrig/topologies/pause/controller.py",
                 "topologies/pause/frames.py": "ccrig/topologies/pause/frames.py",
                 "topologies/pause/rtnl.py": "ccrig/topologies/pause/rtnl.py",
                 "ccrig/commands.py": "ccrig/commands.py", "ccrig/errors.py": "ccrig/errors.py",
                 "ccrig/samples.py": "ccrig/samples.py"}


def agent_zip(path: Path) -> Path:
    """Writes the controller and node 1's agent as one zip Python runs (`python3 agent.pyz ...`); the same
    bytes every time (fixed dates), so runs of one ccrig version ship identical programs."""
    root = Path(__file__).resolve().parents[2]
    files = {f"{pkg}/__init__.py": "" for pkg in ("ccrig", "ccrig/topologies", "ccrig/topologies/pause")}
    files.update({name: (root / src).read_text() for src, name in AGENT_MODULES.items()})
    files["__main__.py"] = "import sys\nfrom ccrig.topologies.pause.emulated import main\nsys.exit(main(sys.argv[1:]))\n"
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
        self.commands, self.cfg = commands, cfg

    def run_up(self, argv: list[str], check: bool = True) -> bool:
        if check:
            self.commands.run(argv, ns=self.cfg.up_ns)
            return True
        return self.commands.ok(argv, ns=self.cfg.up_ns)

    def popen(self, role: str, args: list[str]) -> subprocess.Popen:
        return self.commands.popen([sys.executable, "-m", "ccrig.topologies.pause.emulated", *args],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def end(self, role: str, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)


class OnTestbed:
    """Node 1 and node 2 are machines of a testbed (hosts): the controller runs on node 2's, node 1's tc and
    its agent on node 1's, both from the agent zip the testbed copies there."""
    remote = True

    def __init__(self, testbed, node1: str, node2: str, agent: Path):
        self.testbed, self.agent = testbed, agent
        self.nodes = {"agent": node1, "controller": node2}

    def run_up(self, argv: list[str], check: bool = True) -> bool:
        try:
            return self.testbed.run(self.nodes["agent"], argv, check=check).returncode == 0
        except RunError:
            if check:
                raise
            return False

    def popen(self, role: str, args: list[str]) -> subprocess.Popen:
        node = self.nodes[role]
        argv = [*self.testbed.python(node), self.testbed.stage(node, self.agent), *args]
        return self.testbed.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def end(self, role: str, proc: subprocess.Popen) -> None:
        self.testbed.end(self.nodes[role], proc)


class EmulatedPause:
    """The emulated PAUSE controller of one link, for the runner: start() before traffic, stop() after
    (always, also on errors: it restores link B to μ1 and never raises), stats() at any time.

    start() replaces node 1's shaper on link B by tbf at μ1 over a pfifo of B1 (through Commands, so it is
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
        self._readers: list[threading.Thread] = []
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
            self.where.run_up(["tc", "qdisc", "del", "dev", cfg.up_dev, "root"], check=False)
            for argv in cfg.tbf_argv(cfg.rate_bps):
                self.where.run_up(argv)
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

    def _fail(self, who: str, what: str, timeout: float) -> None:
        said = f"; it said: {self._diag[-1]}" if self._diag else ""
        err = self._error or f"no answer within {timeout:g} s{said}"
        self.stop()
        raise RunError(f"{who} ({what}) failed to start: {err}")

    def _follow(self, proc: subprocess.Popen, name: str, ready: threading.Event) -> None:
        """Reads proc's messages in a thread; ready is set when it is, or when it ended without being so."""
        t = threading.Thread(target=self._read, args=(proc, ready), name=name, daemon=True)
        t.start()
        self._readers.append(t)

    def stop(self) -> PauseStats:
        # the controller first (its last act signals μ1), then node 1's agent (which sets μ1 as it ends)
        for role, proc in (("controller", self.proc), ("agent", self.agent)):
            if proc is None or proc.poll() is not None:
                continue
            try:
                self.where.end(role, proc)
                proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, RunError, OSError):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for t in self._readers:
            t.join(timeout=5)
        # whatever happened to the processes, link B runs at μ1 again (the namespace may be gone already)
        cfg = self.cfg
        if cfg.actuator == "tbf":
            self.where.run_up(cfg.tbf_argv(cfg.rate_bps, verb="change")[0], check=False)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


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
