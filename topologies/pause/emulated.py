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
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from experiments.commands import Commands
from experiments.errors import InputError, RunError
from .controller import MAX_QUANTA, PauseLink
from .frames import FrameSender
from .rtnl import Rtnl, in_namespace, parse_handle

EVENT_FIELDS = ["t", "event", "occupancy", "rate_bps", "latency_s", "actuate_s"]
STATUS_EVERY = 0.25  # seconds between the child's status lines (live Prometheus values)


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
        if not 20e-6 <= self.poll <= 0.1:
            raise InputError(f"pause.poll: got {self.poll!r} s; expected 20us to 100ms")

    @property
    def arrival_pps(self) -> float:
        return self.rate_bps / (8 * self.wire_bytes)

    def tbf_argv(self, rate_bps: float) -> list[list[str]]:
        """The tc commands that put node 1's link B on tbf at rate_bps over a pfifo of B1 (handles as the htb
        shaper's, 1: and 10:, so statistics readers find the queue where they expect it)."""
        dev, burst = self.up_dev, str(self.wire_bytes)
        return [["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", f"{max(8, round(rate_bps))}bit",
                 "burst", burst, "limit", str(self.up_limit * self.wire_bytes)],
                ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo",
                 "limit", str(self.up_limit)]]


# --- the controller process ----------------------------------------------------------------------------

class _Loop:
    def __init__(self, cfg: EmulatedPauseConfig, out):
        self.cfg, self.out = cfg, out
        self.link = PauseLink(cfg.high, cfg.low, cfg.rate_bps, cfg.quanta, cfg.refresh)
        self.down = Rtnl(cfg.down_ns, cfg.down_dev)
        self.up = Rtnl(cfg.up_ns, cfg.up_dev) if cfg.actuator == "tbf" else None
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
        elif self.up is not None and change is not None:
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


def main(argv: list[str]) -> int:
    cfg = EmulatedPauseConfig(**json.loads(argv[0]))
    out = sys.stdout
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


class EmulatedPause:
    """The emulated PAUSE controller of one link, for the runner: start() before traffic, stop() after
    (always, also on errors: it restores link B to μ1 and never raises), stats() at any time.

    start() replaces node 1's shaper on link B by tbf at μ1 over a pfifo of B1 (through Commands, so it is
    in commands.log) and starts the controller process. events_csv, if given, receives every event.
    """

    def __init__(self, cfg: EmulatedPauseConfig, commands: Commands, events_csv: Path | None = None):
        self.cfg, self.commands, self.events_csv = cfg, commands, events_csv
        self.proc: subprocess.Popen | None = None
        self._stats = PauseStats()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: str | None = None
        self._diag: list[str] = []   # what the process printed that is not a message (a traceback)
        self._csv = None

    # lifecycle
    def start(self, timeout: float = 60.0) -> None:
        """Installs the actuator and starts the controller; returns once it polls. The timeout is generous
        because a guest under TCG (the vm testbed) takes seconds to start Python."""
        cfg = self.cfg
        if cfg.actuator == "tbf":
            self.commands.ok(["tc", "qdisc", "del", "dev", cfg.up_dev, "root"], ns=cfg.up_ns)
            for argv in cfg.tbf_argv(cfg.rate_bps):
                self.commands.run(argv, ns=cfg.up_ns)
        if self.events_csv is not None:
            self.events_csv.parent.mkdir(parents=True, exist_ok=True)
            self._csv = open(self.events_csv, "w", newline="")
            csv.writer(self._csv).writerow(EVENT_FIELDS)
        self.proc = self.commands.popen([sys.executable, "-m", "topologies.pause.emulated",
                                         json.dumps(asdict(cfg))], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, name="pause-reader", daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self._error:
            err = self._error or (f"no answer within {timeout:g} s"
                                  + (f"; it said: {self._diag[-1]}" if self._diag else ""))
            self.stop()
            where = f"{cfg.down_dev} in {cfg.down_ns}" if cfg.down_ns else cfg.down_dev
            raise RunError(f"PAUSE controller (watching {where}, qdisc {cfg.down_handle}) failed to start: {err}")

    def stop(self) -> PauseStats:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        # whatever happened to the process, link B runs at μ1 again (the namespace may be gone already)
        cfg = self.cfg
        if cfg.actuator == "tbf":
            self.commands.ok(["tc", "qdisc", "change", "dev", cfg.up_dev, "root", "handle", "1:", "tbf",
                              "rate", f"{round(cfg.rate_bps)}bit", "burst", str(cfg.wire_bytes),
                              "limit", str(cfg.up_limit)], ns=cfg.up_ns)
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
            return PauseStats(**{**asdict(s), "latency_s": list(s.latency_s), "actuate_s": list(s.actuate_s)})

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                if line.strip():
                    self._diag = (self._diag + [line.decode(errors="replace").strip()])[-20:]
                continue
            if "error" in msg:
                self._error = msg["error"]
                self._ready.set()
            elif "ready" in msg:
                self._ready.set()
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
        self._ready.set()


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
    from experiments.exporter import Sample
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
