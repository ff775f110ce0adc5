"""Collectors: the kernel's counters of a running point.

FlowSampler runs experiments/nodes/sampler.py on a node (through the testbed, so it works in a namespace, on a
Mininet host or over SSH) and gathers its JSON lines in a thread. MachineSampler is one such process for every
node of one machine (one per host on the hosts testbed), built by machine_samplers(); QdiscReader reads a link's
`tc -s -j` statistics at each interval boundary.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from bisect import bisect_right
from operator import itemgetter
from pathlib import Path

from ccrig import fanout
from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.machine import cache_dir
from ccrig.procs import stop_group
from ccrig.tail import Tail
from ccrig.threads import Thread
from ccrig.qdiscs.stats import parse, parse_classes
from ccrig.topologies.testbed import Testbed
from ccrig.experiments import nodes

SAMPLER = nodes.SAMPLER
# the same sampler in C (its header says why): built here on first use, cached by the source's hash
NATIVE_SOURCE = nodes.SAMPLER_C
NATIVE = True   # False: always the Python sampler (tests/host/test_sampler.py runs both)


class FlowSampler:
    def __init__(self, testbed: Testbed, node: str, keys: list[str], period: float, t0: float = 0.0,
                 argv: list[str] | None = None, program: list[str] | None = None):
        # samples are kept in unix time; t0 (set once traffic starts) makes them relative on the way out
        self.node, self.keys, self.t0, self.period = node, keys, t0, period
        self.ready = threading.Event()
        # a remote host's clock runs apart from ours: its samples are moved onto our time line
        self.offset = testbed.clock_offset(node)
        if argv is None:   # one node's sockets, found by dumping its namespace
            argv = [a for k in keys for a in ("--match", k)]
        program = program or [*testbed.python(node), str(SAMPLER)]
        argv = [*program, "--period", f"{period:g}", *argv]
        # its lines go to an unlinked file, not a pipe: a full pipe stops the polls while this reader waits for the
        # CPU (seen: 2.6 s without a poll when 8 pairs' 480 iperf3 processes ended at once), and what is in it at
        # the end is read whole however late (a pipe's was dropped after a 2 s wait); nothing outlives the run
        self.out = tempfile.TemporaryFile()
        self.proc = testbed.popen(node, argv, stdout=self.out, stderr=subprocess.PIPE)
        # key -> [(t since t0, fields)]
        self.samples: dict[str, list[tuple[float, dict]]] = {k: [] for k in keys}
        # the sampler's own account, for the fidelity monitor: the times of its polls, its CPU seconds
        self.poll_times: list[float] = []
        self.sched: str | None = None   # the priority it got (sampler.c: prioritise)
        self.cpu: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.thread = Thread(self._read, name=f"ccrig-sampler-{node}")

    def _read(self) -> None:
        tail = Tail(self.out.fileno(), b"\n", free_every=READ_BEHIND)
        while True:
            ended = self.proc.poll() is not None   # asked first: once it has ended, all it wrote is in the file
            lines = tail.read()
            if not lines:
                if ended:
                    return
                time.sleep(self.period / 2)
                continue
            for line in lines.splitlines():
                self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            return
        t = rec["t"] - self.offset
        if "sched" in rec:
            self.sched = rec["sched"]
        self.ready.set()
        self.poll_times.append(t)
        if "cpu" in rec:
            self.cpu.append((t, rec["cpu"]))
        with self.lock:
            for k, fields in rec["s"].items():
                if k in self.samples:
                    self.samples[k].append((t, fields))

    def wait_ready(self, timeout: float) -> None:
        """Returns once the sampler has polled at least once."""
        if not self.ready.wait(timeout):
            raise RunError(f"the TCP_INFO sampler on {self.node} did not start within {timeout:g} s: "
                           f"{self.error() or 'no output'}")

    def snapshot(self, key: str) -> list[tuple[float, dict]]:
        """One socket's samples, times in seconds since t0."""
        with self.lock:
            return [(t - self.t0, f) for t, f in self.samples[key]]

    def window(self, key: str, a: float, b: float) -> list[tuple[float, dict]]:
        """One socket's samples around [a, b] (seconds since t0): the last at or before a through the first after
        b, all that an interval's counters and gauges are read from (analysis.intervals.FlowSeries gives the same
        answers on them as on every sample). Each interval taking every sample since the sampler started made a
        run's intervals quadratic in its length: in a TCG guest, a 6 s spec with four UDP receivers (50 lines a
        second each) spent 16 s an interval on it, and the longer the setup the more."""
        with self.lock:
            got = self.samples[key]
            lo = max(0, bisect_right(got, a + self.t0, key=itemgetter(0)) - 1)
            hi = bisect_right(got, b + self.t0, key=itemgetter(0)) + 1
            return [(t - self.t0, f) for t, f in got[lo:hi]]

    def latest_time(self) -> float | None:
        with self.lock:
            ts = [s[-1][0] for s in self.samples.values() if s]
        return max(ts) - self.t0 if ts else None

    def error(self) -> str:
        """What the sampler said if it died."""
        if self.proc.poll() is None:
            return ""
        return (self.proc.stderr.read() or b"").decode(errors="replace").strip()[-300:]

    def stop(self) -> None:
        stop_group(self.proc)
        self.thread.join(timeout=60)   # the rest of its file: read whole, however busy the machine
        if self.thread.ended.is_set():   # else it still reads the file: it goes when the thread and this do
            self.out.close()


READ_BEHIND = 8 << 20   # bytes read before their room is given back (30 flows write about 1 MB a second)


class MachineSampler(FlowSampler):
    """One sampler process for all the given nodes that share a machine: it enters each node's network
    namespace once to open a netlink socket there and looks every flow socket up by its 4-tuple each period
    (experiments/nodes/sampler.py says why not a dump). Started through the testbed's popen on the group's first
    node, so on the hosts testbed it runs on that host."""

    def __init__(self, testbed: Testbed, nodes: dict[str, tuple[str, list[tuple[str, int, str, int]]]],
                 period: float, t0: float = 0.0):
        # nodes: node -> (its namespace as the sampler names it, its sockets (laddr, lport, raddr, rport))
        argv, keys = [], []
        for ns, socks in nodes.values():
            argv += ["--ns", ns]
            for a, lp, b, rp in socks:
                argv += ["--sock", f"{a},{lp},{b},{rp}"]
                keys.append(f"{lp}:{rp}")
        first = next(iter(nodes))
        # the C build runs where this machine's files are (not on a remote host: there Python, shipped as is)
        native = None if testbed.remote or not NATIVE else native_sampler(testbed.commands)
        super().__init__(testbed, first, keys, period, t0, argv=argv, program=[str(native)] if native else None)
        self.nodes = list(nodes)
        self.native = native is not None


def native_sampler(commands=None) -> Path | None:
    """experiments/nodes/sampler.c built for this machine (cc -O2, under ~/.cache/ccrig, once per source version), or
    None without a C compiler or kernel headers (then the Python sampler runs)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    commands = commands or Commands(None)
    source = NATIVE_SOURCE.read_bytes()
    cache = cache_dir()
    exe = cache / f"sampler-{hashlib.sha256(source).hexdigest()[:16]}"
    if exe.exists():
        return exe
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}")   # two runs building at once each rename a whole file
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if commands.run([cc, "-O2", "-o", str(tmp), str(NATIVE_SOURCE)], check=False, timeout=120).returncode:
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, exe)
    except OSError:   # a read-only home (a guest's): the Python sampler does the same work
        return None
    return exe


def _identity(testbed: Testbed, node: str) -> tuple[str, str]:
    """(the machine the node runs on, its network namespace's inode there): read here for a namespace this process
    enters by path (netns_path: the inode of that path is the namespace's), else asked on the node itself (a
    Mininet host, a host over SSH), where it is a process start each (seconds per run in an emulated guest)."""
    path = testbed.netns_path(node)
    if path is not None:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip(), str(os.stat(path).st_ino)
    out = testbed.run(node, ["sh", "-c", "cat /proc/sys/kernel/random/boot_id; stat -L -c %i /proc/self/ns/net"],
                      timeout=30).stdout.split()
    if len(out) != 2:
        raise RunError(f"could not tell the network namespace of {testbed.where(node)}: got {out!r}")
    return out[0], out[1]


def machine_samplers(testbed: Testbed, flows, period: float) -> list[MachineSampler]:
    """One MachineSampler per machine for the flows' TCP sockets (both ends of each, keyed as Flow.sender_key
    and receiver_key). Replaces one sampler per node: 100 flows made 200 Python processes at 50 Hz."""
    socks: dict[str, list] = {}
    for f in flows:
        snd, rcv = testbed.address(f.sender), testbed.address(f.receiver)
        socks.setdefault(f.sender, []).append((snd, f.client_port, rcv, f.server_port))
        socks.setdefault(f.receiver, []).append((rcv, f.server_port, snd, f.client_port))
    ids = dict(zip(socks, fanout.each(lambda n: _identity(testbed, n), socks)))
    by_machine: dict[str, dict] = {}
    for node, (machine, ino) in ids.items():
        by_machine.setdefault(machine, {})[node] = (f"ino:{ino}", socks[node])
    out: list[MachineSampler] = []
    try:
        for on_machine in by_machine.values():
            out.append(MachineSampler(testbed, on_machine, period))
    except BaseException:
        for s in out:
            s.stop()
        raise
    return out


# --- flows without a TCP socket (UDP) ---------------------------------------------------------------
class ReceiverLog(FlowSampler):
    """A flow without a TCP socket (a UDP source), measured from its receiver's own output: the receiver prints
    the sampler's line format (experiments/nodes/sources.py) into the archive, and this follows the file as
    it grows, keeping its counters under the flow's sender and receiver keys as a sampler would. `proc` is the
    receiver (alive while it reports); stop() stops following, not the receiver (Traffic ends it)."""

    def __init__(self, testbed: Testbed, node: str, source_key: str, keys: list[str], path: Path,
                 proc: subprocess.Popen, period: float, t0: float = 0.0):
        self.node, self.keys, self.t0, self.path, self.proc = node, keys, t0, path, proc
        self.source_key, self.period = source_key, period
        self.ready = threading.Event()
        self.offset = testbed.clock_offset(node)
        self.samples = {k: [] for k in keys}
        self.lock = threading.Lock()
        self._stopped = threading.Event()
        self.thread = Thread(self._follow, name=f"ccrig-receiver-log-{node}")

    def _follow(self) -> None:
        with open(self.path, "rb") as f:
            tail = Tail(f.fileno())
            while not self._stopped.is_set():
                lines = tail.read()
                if not lines:
                    self._stopped.wait(self.period / 2)
                for line in lines.splitlines():
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    fields = rec["s"].get(self.source_key)
                    self.ready.set()
                    if fields is None:
                        continue
                    with self.lock:
                        for k in self.keys:
                            self.samples[k].append((rec["t"] - self.offset, fields))

    def error(self) -> str:
        if self.proc.poll() is None:
            return ""
        return f"the receiver ended ({self.path.name}: {self.path.read_text()[-300:].strip() or 'empty'})"

    def stop(self) -> None:
        self._stopped.set()
        self.thread.join(timeout=2)


class QdiscReader:
    """The statistics of every qdisc on one interface, read on demand; with classes under the discipline
    (drr's one class per flow) their counters too, as rows whose `class` column is set."""

    def __init__(self, testbed: Testbed, node: str, dev: str, classes_under: str | None = None):
        self.testbed, self.node, self.dev, self.classes_under = testbed, node, dev, classes_under

    def read(self) -> list[dict]:
        if not self.testbed.owned(self.node):
            return []  # a hardware switch's queue is not ours to read
        out = self.testbed.run(self.node, ["tc", "-s", "-j", "qdisc", "show", "dev", self.dev]).stdout
        rows = parse(out)
        if self.classes_under:
            text = self.testbed.run(self.node, ["tc", "-s", "class", "show", "dev", self.dev,
                                                "parent", self.classes_under]).stdout
            rows += [{**r, "class": "yes"} for r in parse_classes(text)]
        for r in rows:
            r["node"], r["dev"] = self.node, self.dev
        return rows
