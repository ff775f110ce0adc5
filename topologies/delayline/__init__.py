"""Propagation delay on any kernel: netem where the kernel has it, else a delay line (delayline.c) per delayed link.

    delay: {via: auto}     # auto: netem where this kernel has sch_netem, else the line | netem | line

A link a - b with added delay becomes a - [line] - b on the netns testbed (netns.py here): the line is a namespace
of its own, `<prefix>-line<i>` for link i, with a veth toward each end. Each delayed direction is one delayline
process that takes every frame off its ingress veth (AF_PACKET), holds it for the direction's one-way delay from the
kernel's receive stamp and sends it on, in order. A direction without delay is forwarded in the kernel (a u32 match-all
filter with a mirred redirect), so it costs no process. The line is a pure delay: the link's queue stays the kernel
qdisc of the end that transmits into it, and the line has room for the largest bandwidth-delay product a spec may
ask (ROOM_BYTES per direction; check_room refuses more before anything is set up, naming the field).

Every process writes its counters and a histogram of how late each frame left (its realised hold minus the
configured delay) to a JSON file; stop() returns them, and the runner puts them in the repetition's fidelity verdict
beside TCP's own min RTT (experiments/run/fidelity.py), so the delay a run had is measured, not assumed.

Another mode (a time-varying delay, mahimahi's trace-driven delivery) is one more `struct mode` in delayline.c and
a field of Line here (Line.mode, passed as its own argument); the wiring and the accounting stay as they are.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ccrig.commands import Commands
from ccrig.errors import field_error
from ccrig.machine import cache_dir
from ..topology import Egress, Topology

SOURCE = Path(__file__).with_name("delayline.c")
# per direction: reserved, never committed beyond what the run fills (MAP_NORESERVE), so it costs nothing idle
ROOM_BYTES = 1 << 30
# a frame's realised hold may exceed its delay by this much (median over the repetition), as the issue asks
LATE_OK_S = 0.2e-3
VIA = ("auto", "netem", "line")


class DelaySpec(BaseModel):
    """`delay:` in a spec: how the topology's added delay is made."""
    model_config = ConfigDict(extra="forbid")
    via: Literal["auto", "netem", "line"] = "auto"


def slot_bytes(mtu: int) -> int:
    """A slot holds one wire frame (MTU + Ethernet header), rounded up to a cache line."""
    return (mtu + 14 + 63) // 64 * 64


def room_packets(mtu: int) -> int:
    return ROOM_BYTES // slot_bytes(mtu)


def slots_for(delay_s: float, topology: Topology) -> int:
    """A line's ring: twice the bandwidth-delay product at the topology's fastest shaped rate (what can feed it at
    most; the spec's check_room saw to it that this fits), at least 4096, at most the room. The ring wraps through
    every slot it has, so a ring of the whole room would end up resident (a gigabyte) at any rate."""
    rates = [e.rate.bps(topology.wire) for l in topology.links for e in (l.a_to_b, l.b_to_a) if e.rate is not None]
    room = room_packets(topology.mtu)
    if not rates:
        return room
    need = 2 * delay_s * max(rates) / (8.0 * topology.wire) + 1024
    return int(min(room, max(4096, need)))


def check_room(path: str, one_way_s: float, rate, wire_bytes: int, mtu: int) -> None:
    """Refuses a one-way delay whose bandwidth-delay product at `rate` (the fastest a link can feed the line) would
    not fit a line (with 10 % to spare). netem's limit (topologies/links.py) is larger, but one rule for both keeps a
    spec valid on every kernel."""
    if rate is None or one_way_s <= 0:
        return
    pps = rate.bps(wire_bytes) / (8.0 * wire_bytes)
    need = one_way_s * pps * 1.1 + 64
    room = room_packets(mtu)
    if need > room:
        most = (room - 64) / 1.1 / pps
        raise field_error(path, f"{2 * one_way_s:g}s", f"an RTT of at most {2 * most:.3g}s at "
                                                      f"{rate.bps(wire_bytes) / 1e6:g} Mbit/s: a delay line holds {room} packets of {mtu}-byte MTU per direction")


@dataclass(frozen=True)
class Line:
    """The delay line of link `index` (a - b): each direction's one-way delay, 0 where it has none."""
    index: int
    a: str
    b: str
    a_to_b: float
    b_to_a: float
    mode: str = "constant"

    @property
    def name(self) -> str:
        return f"line{self.index}"

    def directions(self) -> list[tuple[str, str, float]]:
        return [(x, y, d) for x, y, d in ((self.a, self.b, self.a_to_b), (self.b, self.a, self.b_to_a)) if d > 0]


def plan(topology: Topology, line: bool) -> tuple[Topology, list[Line]]:
    """The topology a testbed builds and the lines it puts in it: with line False, the topology as it is (netem makes
    the delay); else the same with every delay taken off the links' egresses and one Line per delayed link."""
    if not line:
        return topology, []
    lines, links = [], []
    for i, link in enumerate(topology.links):
        if link.a_to_b.delay > 0 or link.b_to_a.delay > 0:
            lines.append(Line(i, link.a, link.b, link.a_to_b.delay, link.b_to_a.delay))
            link = dataclasses.replace(link, a_to_b=_undelayed(link.a_to_b), b_to_a=_undelayed(link.b_to_a))
        links.append(link)
    return dataclasses.replace(topology, links=links, nodes=list(topology.nodes), pairs=list(topology.pairs)), lines


def _undelayed(e: Egress) -> Egress:
    return dataclasses.replace(e, delay=0.0)


def has_delay(topology: Topology) -> bool:
    return any(l.a_to_b.delay > 0 or l.b_to_a.delay > 0 for l in topology.links)


def describe(topology: Topology, via: str) -> dict:
    """env.json's `links.delay`: each delayed direction's one-way delay and what made it."""
    out = {}
    for i, link in enumerate(topology.links):
        for a, b, e in ((link.a, link.b, link.a_to_b), (link.b, link.a, link.b_to_a)):
            if e.delay > 0:
                out[f"{a}->{b}"] = {"delay_s": e.delay, "realised_by": "netem" if via == "netem" else
                                    f"line (delayline in namespace <prefix>-line{i}, AF_PACKET)"}
    return out


def built() -> Path:
    """The program for this source, whether built yet or not (cached by the source's hash)."""
    tag = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return cache_dir() / f"delayline-{tag}" / "delayline"


def why_not() -> list[str]:
    """What this machine lacks to run a line (empty: nothing)."""
    if built().exists() or shutil.which("gcc"):
        return []
    return ["the delay line is not built and gcc is missing (Debian: apt-get install gcc, or `make deps`)"]


def build(commands: Commands) -> Path:
    """Builds the program once per source version; two runs building at once each rename a whole folder."""
    exe = built()
    if exe.exists():
        return exe
    tmp = exe.parent.with_name(f"{exe.parent.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        commands.run(["gcc", "-O2", "-Wall", "-o", str(tmp / exe.name), str(SOURCE)], timeout=300)
        try:
            os.replace(tmp, exe.parent)
        except OSError:   # another run finished first: its build is the same
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return exe


def late_quantile(stats: dict, q: float) -> float | None:
    """The q-quantile of how late frames left (seconds beyond the configured delay), from the histogram in
    microsecond bins (the bin's middle); frames later than the histogram count as its end; None without frames."""
    bins = sorted((int(k), v) for k, v in stats.get("late_us", {}).items())
    over = stats.get("late_over", 0)
    early = stats.get("early", 0)
    n = sum(v for _, v in bins) + over + early
    if n == 0:
        return None
    rank, seen = q * (n - 1), early
    if rank < early:
        return 0.0
    for us, v in bins:
        seen += v
        if seen > rank:
            return (us + 0.5) * 1e-6
    return stats.get("late_over_us", 0) * 1e-6


def summarise(stats: dict) -> dict:
    """One direction's figures for summary.json: frames, the realised hold, how late (median, p99), losses."""
    n = stats.get("packets", 0)
    out = {k: stats.get(k) for k in ("delay_ns", "packets", "bytes", "socket_drops", "dropped_oversize",
                                      "stamp_fallback", "send_errors", "early")}
    out.update(hold_min_s=stats.get("hold_min_ns", 0) * 1e-9, hold_max_s=stats.get("hold_max_ns", 0) * 1e-9,
               hold_mean_s=stats.get("hold_sum_ns", 0) * 1e-9 / n if n else None, cpu_s=stats.get("cpu_ns", 0) * 1e-9,
               late_p50_s=late_quantile(stats, 0.5), late_p99_s=late_quantile(stats, 0.99),
               lost=stats.get("socket_drops", 0) + stats.get("dropped_oversize", 0) + stats.get("send_errors", 0))
    return out
