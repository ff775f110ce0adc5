"""Fine-grained queue occupancy and per-packet sojourn of root qdiscs, from the kernel's qdisc tracepoints.

sojourn.bpf.c (tp_btf on qdisc:qdisc_enqueue / qdisc:qdisc_dequeue) reports every accepted enqueue and every
dequeue of the watched qdiscs with the root's qlen and backlog just after it, and a dequeue with the packet's
time in the tree; monitor.c loads it (libbpf) and streams the 32-byte events into a file. Nothing is polled: the
occupancy is known at every change, so its time average is exact (Little's law holds on it) and the sojourn is
each packet's own. Both programs are built here on first use (clang, gcc, libbpf), cached by their sources' hash
under ~/.cache/ccrig; the BPF object is CO-RE, so a guest kernel uses the build its host made.

    QueueMonitor(commands, [Watched(...)], out_dir)   start() -> interval(a, b) per interval -> stop()
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.machine import cache_dir
from ccrig.needs import Need
from ccrig.procs import wait_for_line
from ccrig.tail import Tail

HERE = Path(__file__).parent
SOURCES = (HERE / "sojourn.bpf.c", HERE / "monitor.c")
BTF = Path("/sys/kernel/btf/vmlinux")
# a tp_btf program attaches through the tracepoint's BTF type, btf_trace_<name>: its presence in the kernel's BTF is
# what the monitor needs (tracefs need not be mounted: a fresh machine here had no /sys/kernel/tracing)
TRACEPOINT_TYPES = (b"btf_trace_qdisc_enqueue", b"btf_trace_qdisc_dequeue")
# the multiarch include directory where Debian keeps asm/types.h (the BPF target has none)
ASM_INCLUDE = Path("/usr/include/x86_64-linux-gnu")
MAX_WATCHED = 16   # MAX_TARGETS in sojourn.bpf.c
EVENT = np.dtype([("t_ns", "<u8"), ("sojourn_ns", "<u8"), ("slot", "<u4"), ("kind", "<u4"), ("qlen", "<u4"),
                  ("backlog", "<u4")])
ENQUEUE, DEQUEUE, DEQUEUE_UNSEEN = 0, 1, 2
# monitor.c's record after each drain of the ring: every event stamped before its t_ns is written
MARK_SLOT, MARK = 0xFFFFFFFF, 3
# the monitor drains every 20 ms; how long an interval waits for its mark before taking what it has
DRAIN_WAIT_S = 2.0
# the raw events as the loader wrote them (EVENT records), compressed once the repetition ends
RAW_NAME = "queue-events.bin.gz"
RAW_FORMAT = ("little-endian records of 32 bytes: t_ns u64 (CLOCK_MONOTONIC; + clock_offset_s*1e9 = epoch), "
              "sojourn_ns u64, slot u32 (index into qdiscs), kind u32 (0 enqueue, 1 dequeue, 2 dequeue of a packet "
              "enqueued before the monitor looked; 3 with slot 0xffffffff: the monitor's mark that all events stamped "
              "before t_ns are written), qlen u32 and backlog u32 (bytes) just after the event")
METHOD = "bpf: qdisc:qdisc_enqueue/qdisc_dequeue tracepoints, every event (exact occupancy, per-packet sojourn)"


def built() -> tuple[Path, Path]:
    """(BPF object, loader) for these sources, whether built yet or not."""
    tag = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    d = cache_dir() / f"sojourn-{tag}"
    return d / "sojourn.bpf.o", d / "monitor"


def why_not() -> list[str]:
    """What this kernel and machine lack for the monitor (empty: nothing)."""
    why = []
    release = os.uname().release
    if not BTF.exists():
        why.append(f"kernel {release} has no BTF ({BTF}; needs CONFIG_DEBUG_INFO_BTF=y): use the vm testbed")
    else:
        btf = BTF.read_bytes()
        if not all(t in btf for t in TRACEPOINT_TYPES):
            why.append(f"kernel {release} lacks the qdisc:qdisc_enqueue/qdisc_dequeue tracepoints (Linux 5.17 and "
                       f"later have them; none in its BTF, {BTF}): use the vm testbed")
    obj, exe = built()
    if not (obj.exists() and exe.exists()):
        missing = [t for t in ("clang", "gcc", "bpftool") if shutil.which(t) is None]
        if not Path("/usr/include/bpf/libbpf.h").exists():
            missing.append("libbpf-dev")
        if missing:
            why.append(f"the queue monitor is not built and {', '.join(missing)} is missing (Debian: apt-get "
                       f"install clang gcc bpftool libbpf-dev, or `make deps`)")
    return why


def need() -> Need:
    why = why_not()
    return Need("the queue monitor (BPF on the qdisc tracepoints)", "queue_monitor", not why, "; ".join(why))


def build(commands: Commands) -> tuple[Path, Path]:
    """Builds the BPF object and its loader once per source version (vmlinux.h from this kernel's BTF)."""
    obj, exe = built()
    if obj.exists() and exe.exists():
        return obj, exe
    d = obj.parent
    tmp = d.with_name(f"{d.name}.{os.getpid()}")   # two runs building at once each rename a whole folder
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        header = commands.run(["bpftool", "btf", "dump", "file", str(BTF), "format", "c"], timeout=120).stdout
        (tmp / "vmlinux.h").write_text(header)
        include = ["-I", str(ASM_INCLUDE)] if ASM_INCLUDE.is_dir() else []
        commands.run(["clang", "-O2", "-g", "-target", "bpf", "-I", str(tmp), *include, "-c", str(SOURCES[0]),
                      "-o", str(tmp / obj.name)], timeout=300)
        commands.run(["gcc", "-O2", "-Wall", "-o", str(tmp / exe.name), str(SOURCES[1]), "-lbpf", "-lelf", "-lz"],
                     timeout=300)
        (tmp / "vmlinux.h").unlink()
        try:
            os.replace(tmp, d)
        except OSError:   # another run finished first: its build is the same
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return obj, exe


@dataclass(frozen=True)
class Watched:
    """A root qdisc to watch: its device on a node, the namespace inode and ifindex that name it to the kernel, and
    the rate it drains at (for the transmission time reported beside the sojourn)."""
    node: str
    dev: str
    netns: int
    ifindex: int
    rate_bps: float | None = None

    @property
    def label(self) -> str:
        return f"{self.node}:{self.dev}"


class QueueMonitor:
    def __init__(self, commands: Commands, watched: list[Watched], out_dir: Path):
        if not 1 <= len(watched) <= MAX_WATCHED:
            raise RunError(f"the queue monitor watches 1 to {MAX_WATCHED} qdiscs; asked for {len(watched)}")
        self.commands, self.watched, self.out = commands, watched, Path(out_dir)
        self.events_path = self.out / "queue-events.bin"
        self.proc: subprocess.Popen | None = None
        self.tail: Tail | None = None
        self.lost: int | None = None
        # the last state of each watched qdisc before the interval being read: (time ns, qlen, backlog)
        self.state = [(None, 0, 0) for _ in watched]
        self.mono_offset = 0.0
        self.totals = {"events": 0, "sojourns": 0}
        self.pending = np.zeros(0, dtype=EVENT)   # read but stamped after the last interval's end
        self.drained_ns = 0

    def start(self, timeout: float = 60) -> None:
        obj, exe = build(self.commands)
        self.out.mkdir(parents=True, exist_ok=True)
        # the events carry CLOCK_MONOTONIC (bpf_ktime_get_ns); intervals are wall-clock times
        self.mono_offset = time.time() - time.monotonic()
        argv = [str(exe), str(obj), *[f"{w.netns}:{w.ifindex}" for w in self.watched]]
        with open(self.events_path, "wb") as sink:
            self.proc = self.commands.popen(argv, stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.PIPE)
        line = wait_for_line(self.proc, self.proc.stderr, "ready", timeout)
        if line != "ready":
            rest = self._stop_proc()
            raise RunError(f"the queue monitor did not start: {line or rest or 'no message'}")
        self.tail = Tail(os.open(self.events_path, os.O_RDONLY), EVENT.itemsize)

    def _take(self) -> None:
        """What the monitor has written since the last look, into the pending events; its marks move `drained`."""
        ev = np.frombuffer(self.tail.read(), dtype=EVENT)
        marks = ev["slot"] == MARK_SLOT
        if marks.any():
            self.drained_ns = max(self.drained_ns, int(ev["t_ns"][marks].max()))
        self.pending = np.concatenate([self.pending, ev[~marks]])

    def interval(self, a: float, b: float) -> dict[str, dict]:
        """Each watched qdisc over [a, b] (wall-clock seconds): sojourn mean/p50/p99/max of the packets dequeued
        in it, occupancy (packets, bytes) time-averaged and its maximum, packets enqueued and dequeued. The events
        are cut at b by their own times, once the monitor's mark says it has written all before b: how late its
        loop or this call runs on a busy machine moves no event into the wrong interval."""
        a_ns = (a - self.mono_offset) * 1e9
        b_ns = (b - self.mono_offset) * 1e9
        deadline = time.monotonic() + DRAIN_WAIT_S
        self._take()
        while self.drained_ns < b_ns and time.monotonic() < deadline and self.proc is not None \
                and self.proc.poll() is None:
            time.sleep(0.005)
            self._take()
        later = self.pending["t_ns"] >= b_ns
        ev, self.pending = self.pending[~later], self.pending[later]
        self.totals["events"] += len(ev)
        out = {}
        for slot, w in enumerate(self.watched):
            e = ev[ev["slot"] == slot]
            out[w.label] = self._summary(slot, e, a_ns, b_ns)
        return out

    def _summary(self, slot: int, e: np.ndarray, a_ns: float, b_ns: float) -> dict:
        t_prev, q_prev, bl_prev = self.state[slot]
        t = e["t_ns"].astype(np.float64)
        deq = e[e["kind"] == DEQUEUE]
        soj = deq["sojourn_ns"] / 1e9
        # piecewise constant: the state before the first event holds from a; each event's state until the next
        starts = np.concatenate([[a_ns], np.clip(t, a_ns, b_ns)])
        ends = np.concatenate([np.clip(t, a_ns, b_ns), [b_ns]])
        ql = np.concatenate([[q_prev], e["qlen"].astype(np.float64)])
        bl = np.concatenate([[bl_prev], e["backlog"].astype(np.float64)])
        span = max(b_ns - a_ns, 1.0)
        if len(e):
            self.state[slot] = (t[-1], int(e["qlen"][-1]), int(e["backlog"][-1]))
        self.totals["sojourns"] += len(soj)
        return {
            "enqueued": int(np.sum(e["kind"] == ENQUEUE)), "dequeued": int(np.sum(e["kind"] != ENQUEUE)),
            "sojourn_mean_s": float(soj.mean()) if len(soj) else None,
            "sojourn_p50_s": float(np.percentile(soj, 50)) if len(soj) else None,
            "sojourn_p99_s": float(np.percentile(soj, 99)) if len(soj) else None,
            "sojourn_max_s": float(soj.max()) if len(soj) else None,
            "occupancy_mean_packets": float(np.sum(ql * (ends - starts)) / span),
            "occupancy_max_packets": int(max(ql.max(), 0)),
            "occupancy_mean_bytes": float(np.sum(bl * (ends - starts)) / span),
            "occupancy_max_bytes": int(max(bl.max(), 0)),
        }

    def _stop_proc(self) -> str:
        if self.proc is None or self.proc.returncode is not None:
            return ""
        stdin, self.proc.stdin = self.proc.stdin, None   # its end closing is the monitor's cue to stop
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        text = err.decode(errors="replace")
        for line in text.splitlines():
            if line.startswith("lost "):
                self.lost = int(line.split()[1])
        return text.strip()

    def stop(self) -> dict:
        """Ends the monitor; what the archive keeps of it (the raw events compressed, the binary removed)."""
        self._stop_proc()
        if self.tail is not None:
            os.close(self.tail.fd)
            self.tail = None
        if self.events_path.exists():
            with open(self.events_path, "rb") as src, gzip.open(self.out / RAW_NAME, "wb", compresslevel=3) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            self.events_path.unlink()
        # sojourns: the dequeued packets whose enqueue was seen. Not those tbf cut from a super-packet
        # (topology.gso): the root's enqueue event names the super-packet, its pieces are new skbs
        return {"method": METHOD, "qdiscs": [w.label for w in self.watched], "events": self.totals["events"],
                "sojourns": self.totals["sojourns"], "lost_events": self.lost, "raw": RAW_NAME, "raw_format": RAW_FORMAT,
                "clock_offset_s": self.mono_offset}


def read_events(rep_dir: Path, summary: dict) -> dict[str, np.ndarray]:
    """A repetition's raw events per watched qdisc (label -> EVENT records, t_ns turned into epoch seconds in a
    float field `t`), from the archive."""
    path = Path(rep_dir) / summary.get("raw", RAW_NAME)
    if not path.is_file():
        return {}
    data = gzip.decompress(path.read_bytes())
    ev = np.frombuffer(data[:len(data) // EVENT.itemsize * EVENT.itemsize], dtype=EVENT)
    t = ev["t_ns"] / 1e9 + summary.get("clock_offset_s", 0.0)
    return {label: np.rec.fromarrays([t[ev["slot"] == i], *(ev[n][ev["slot"] == i] for n in EVENT.names)],
                                     names=["t", *EVENT.names])
            for i, label in enumerate(summary.get("qdiscs", []))}
