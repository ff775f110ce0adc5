"""Collectors: the kernel's counters of a running point.

FlowSampler runs experiments/sampler.py on a node (through the testbed, so it works in a namespace, on a
Mininet host or over SSH) and gathers its JSON lines in a thread. QdiscReader reads a link's `tc -s -j`
statistics at each interval boundary.
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from ccrig.errors import RunError
from ccrig.procs import stop_group
from ccrig.qdiscs.stats import parse, parse_classes
from ccrig.topologies.testbed import Testbed

SAMPLER = Path(__file__).with_name("sampler.py")


class FlowSampler:
    def __init__(self, testbed: Testbed, node: str, keys: list[str], period: float, t0: float = 0.0):
        # samples are kept in unix time; t0 (set once traffic starts) makes them relative on the way out
        self.node, self.keys, self.t0 = node, keys, t0
        self.ready = threading.Event()
        # a remote host's clock runs apart from ours: its samples are moved onto our time line
        self.offset = testbed.clock_offset(node)
        argv = [*testbed.python(node), str(SAMPLER), "--period", f"{period:g}"]
        for k in keys:
            argv += ["--match", k]
        self.proc = testbed.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # key -> [(t since t0, fields)]
        self.samples: dict[str, list[tuple[float, dict]]] = {k: [] for k in keys}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            t = rec["t"] - self.offset
            self.ready.set()
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
