"""Packet capture per link: tcpdump on the chosen interfaces, headers only, capped in size.

    capture: {links: [d1-r2, bottleneck], snaplen: 128, max_mb: 200}

A link is named by the node that captures and its peer (`d1-r2`: d1's interface toward r2, so what arrives at the
receiver d1 and what it sends back), or `bottleneck` (the bottleneck router's egress). The pcap files land in the
repetition's folder (streamed from tcpdump's standard output, so a remote host's capture lands here too); max_mb caps them all together: a watcher stops every capture once their sum reaches it, so a
long study cannot fill the disk, and summary.json says that it did and when. tcpdump's own drops ("dropped by
kernel") are reported: a capture that lost packets says so.
"""
from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ccrig.analysis import pcap
from ccrig.errors import RunError, field_error
from ccrig.procs import wait_for_line
from ccrig.threads import Thread

LINK = re.compile(r"^(bottleneck|[A-Za-z][A-Za-z0-9_]*-[A-Za-z][A-Za-z0-9_]*)$")
WATCH_PERIOD = 0.05   # how often the cap is checked: the overshoot is at most this long of capture
# --immediate-mode: tcpdump otherwise gets packets from the kernel in blocks handed over when full or 1 s old, so
# the file grows in jumps past the cap, and a stop soon after the last packet loses the block without counting it


class CaptureSpec(BaseModel):
    """The spec's `capture:` section."""
    model_config = ConfigDict(extra="forbid")
    links: list[str] = Field(min_length=1, max_length=16)
    snaplen: int = Field(128, ge=68, le=65535)   # 68: IPv4 and TCP headers with options
    max_mb: float = Field(200, gt=0, le=100_000)

    @field_validator("links")
    @classmethod
    def _links(cls, v):
        for x in v:
            if not LINK.match(x):
                raise ValueError(f"got {x!r}; expected NODE-PEER (e.g. d1-r2) or bottleneck")
        return v


def interfaces(spec: CaptureSpec, topo, testbed=None) -> list[tuple[str, str, str]]:
    """(link as named, node, interface) for each captured link (the interface as the testbed names it); a link the
    topology lacks is an input error."""
    out = []
    for i, name in enumerate(spec.links):
        if name == "bottleneck":
            node, peer = topo.bottleneck
        else:
            node, peer = name.split("-", 1)
        try:
            dev = topo.egress_of(node, peer).name
            out.append((name, node, testbed.egress_device(node, peer) if testbed is not None else dev))
        except (StopIteration, KeyError):
            links = ", ".join(f"{l.a}-{l.b}" for l in topo.links[:6])
            raise field_error(f"capture.links[{i}]", name, f"a link of the topology as NODE-PEER ({links}, ...) "
                                                           f"or bottleneck") from None
    return out


class Capture:
    def __init__(self, testbed, spec: CaptureSpec, topo, out_dir: Path):
        self.testbed, self.spec, self.out = testbed, spec, Path(out_dir)
        self.links = interfaces(spec, topo, testbed)
        self.procs: list[tuple[str, str, str, Path, subprocess.Popen]] = []
        self.capped_at: float | None = None
        self.t0 = 0.0
        self._stop = threading.Event()
        self._watcher: Thread | None = None

    def start(self, timeout: float = 30) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.t0 = time.time()
        for name, node, dev in self.links:
            path = self.out / f"capture-{name}.pcap"
            # -w -: the pcap streams back to this machine's file whatever the testbed (over SSH from a host);
            # -U: each packet written as it comes, so the size the cap watches is the size on disk
            argv = ["tcpdump", "-i", dev, "-s", str(self.spec.snaplen), "-n", "-U", "--immediate-mode", "-w", "-"]
            with open(path, "wb") as sink:
                proc = self.testbed.node(node).popen(argv, stdout=sink, stderr=subprocess.PIPE)
            self.procs.append((name, node, dev, path, proc))
        # tcpdump says "listening on DEV" on stderr once its socket is open: from then on nothing is missed
        for name, node, dev, path, proc in self.procs:
            line = wait_for_line(proc, proc.stderr, "listening on", timeout)
            if "listening on" not in line:
                self.stop()
                raise RunError(f"capture on {node} {dev} ({name}) did not start: {line or 'no message'}")
        self._watcher = Thread(self._watch, name="ccrig-capture-watch")

    def _size(self) -> int:
        return sum(p.stat().st_size for *_, p, _ in self.procs if p.exists())

    def _watch(self) -> None:
        cap = self.spec.max_mb * 1e6
        while not self._stop.wait(WATCH_PERIOD):
            if self._size() >= cap:
                self.capped_at = time.time() - self.t0
                self._end()
                return

    def _end(self) -> None:
        for _, node, _, _, proc in self.procs:
            if proc.poll() is None:
                # tcpdump flushes its file and prints its statistics on SIGTERM (sent on the host, remotely)
                self.testbed.end(node, proc)

    def stop(self) -> dict:
        """Ends every capture; what summary.json keeps: per link its file, packets captured and tcpdump's drops."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        self._end()
        links = []
        for name, node, dev, path, proc in self.procs:
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            text = err.decode(errors="replace") if isinstance(err, bytes) else (err or "")
            stats = {k: int(v) for v, k in re.findall(r"(\d+) packets? (captured|dropped by kernel|received by "
                                                      r"filter)", text)}
            count = pcap.count(path) if path.exists() else 0
            links.append({"link": name, "node": node, "dev": dev, "file": path.name,
                          "bytes": path.stat().st_size if path.exists() else 0, "packets": count,
                          "dropped_by_capture": stats.get("dropped by kernel"),
                          "captured_by_tcpdump": stats.get("captured")})
        self.procs = []
        out = {"snaplen": self.spec.snaplen, "max_mb": self.spec.max_mb, "links": links,
               "capped": self.capped_at is not None}
        if self.capped_at is not None:
            out["capped_after_s"] = round(self.capped_at, 3)
            out["note"] = (f"the captures reached max_mb ({self.spec.max_mb:g} MB together) "
                           f"{self.capped_at:.1f} s after they started and were stopped; later packets are not in them")
        lost = sum(l["dropped_by_capture"] or 0 for l in links)
        if lost:
            out["warning"] = f"the capture itself lost {lost} packets (tcpdump: dropped by kernel)"
        return out
