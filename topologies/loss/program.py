"""The loss program on one link's egress: build it (clang, as tcp_modules builds its BPF), attach it (clsact +
cls_bpf direct-action, tc's own ELF loader), set its state and read its counters through its array map.

    tc qdisc add dev D clsact
    tc filter add dev D egress bpf da obj loss.bpf.o sec tc
    bpftool map update id M key 1 0 0 0 value <p * 2^32, 8 bytes little-endian>
    bpftool -j map dump id M          # the counters: dropped, passed, dropped while down, exempt

The map is found through the program tc loaded (its id in `tc -j filter show`, its maps in `bpftool prog show`),
so nothing is pinned and nothing outlives the namespace (on a host: the undo journal removes the clsact).
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import RunError

SOURCE = Path(__file__).with_name("loss.bpf.c")
BUILD = Path(__file__).with_name("build")
OBJECT = BUILD / "loss.bpf.o"
# the map's slots, as loss.bpf.c numbers them
MODE, P_LOSS, P_GOOD_BAD, P_BAD_GOOD, P_LOSS_BAD, STATE, DOWN, DROPPED, PASSED, DOWN_DROPPED, EXEMPT = range(11)
PASS, BERNOULLI, GILBERT = 0, 1, 2
ONE = 1 << 32   # probability 1 as a threshold on bpf_get_prandom_u32()
# a read of the counters, once per interval: a few ms here, but over 10 s once in a TCG guest beside CI's host tier
# (2026-12-03), which failed the repetition; a read that slow makes the interval late (the sampler's lateness
# spoils it, and it runs again), not the run failed
COUNTS_TIMEOUT_S = 45.0
# the multiarch include directory where Debian keeps asm/types.h (linux/bpf.h needs it; -target bpf has none)
ASM_INCLUDE = Path("/usr/include/x86_64-linux-gnu")


def threshold(p: float) -> int:
    return min(ONE, max(0, round(p * ONE)))


def why_not() -> list[str]:
    """What this machine lacks to build and attach the program (empty: nothing)."""
    why = []
    if not OBJECT.exists() or OBJECT.stat().st_mtime < SOURCE.stat().st_mtime:
        missing = [t for t in ("clang", "llvm-strip") if shutil.which(t) is None]
        if missing:
            why.append(f"the loss BPF program is not built and {', '.join(missing)} is missing (Debian: "
                       f"apt-get install clang llvm, or `make deps`)")
    if shutil.which("bpftool") is None:
        why.append("bpftool is not installed (Debian: apt-get install bpftool, or `make deps`); it reads the "
                   "program's drop counters")
    return why


def build(commands: Commands) -> Path:
    """The object, compiled when missing or older than its source."""
    if OBJECT.exists() and OBJECT.stat().st_mtime >= SOURCE.stat().st_mtime:
        return OBJECT
    BUILD.mkdir(exist_ok=True)
    # a file of this process's own: pairs side by side are forked processes that build on first use together,
    # and with one shared name one renamed it away under another's llvm-strip (a fresh clone's quick study)
    tmp = OBJECT.with_suffix(f".{os.getpid()}.tmp")
    include = ["-I", str(ASM_INCLUDE)] if ASM_INCLUDE.is_dir() else []
    try:
        commands.run(["clang", "-O2", "-g", "-target", "bpf", *include, "-c", str(SOURCE), "-o", str(tmp)])
        # drop DWARF, keep BTF (tc's libbpf loader reads the map's definition from it)
        commands.run(["llvm-strip", "-g", str(tmp)])
        tmp.replace(OBJECT)   # atomic: whichever process renames last, the object is a whole one
    finally:
        tmp.unlink(missing_ok=True)
    return OBJECT


def attach_argv(dev: str, obj: str, hook: str = "egress") -> list[list[str]]:
    """hook: egress, or ingress (a link's far end, for outages); one clsact serves both."""
    return [["tc", "qdisc", "replace", "dev", dev, "clsact"],
            ["tc", "filter", "add", "dev", dev, hook, "bpf", "da", "obj", obj, "sec", "tc"]]


def detach_argv(dev: str) -> list[str]:
    return ["tc", "qdisc", "del", "dev", dev, "clsact"]


def _bytes(fmt: str, v: int) -> list[str]:
    return [str(b) for b in struct.pack(fmt, v)]


@dataclass
class LinkDropper:
    """The program for link node -> peer, attached on `dev` of `at` (a testbed node): node's egress, or peer's
    ingress (hook)."""
    testbed: object
    node: str
    peer: str
    dev: str
    hook: str = "egress"
    map_id: int | None = None

    @property
    def at(self) -> str:
        return self.node if self.hook == "egress" else self.peer

    @property
    def name(self) -> str:
        return f"{self.node}->{self.peer}" + (" (ingress)" if self.hook == "ingress" else "")

    def attach(self, obj: Path) -> None:
        at = self.at
        path = self.testbed.stage(at, obj)
        self.testbed.remember_undo(at, detach_argv(self.dev))
        for argv in attach_argv(self.dev, path, self.hook):
            self.testbed.run(at, argv)
        shown = json.loads(self.testbed.run(at, ["tc", "-j", "filter", "show", "dev", self.dev,
                                                 self.hook]).stdout or "[]")
        prog = next((f["options"]["prog"]["id"] for f in shown if "prog" in f.get("options", {})), None)
        if prog is None:
            raise RunError(f"the loss program on {self.name} ({self.testbed.where(at)}, {self.dev}): tc "
                           f"loaded no program")
        info = json.loads(self.testbed.run(at, ["bpftool", "-j", "prog", "show", "id", str(prog)]).stdout)
        self.map_id = info["map_ids"][0]

    def detach(self) -> None:
        """Takes the program off the link; best effort, never raises."""
        try:
            self.testbed.run(self.at, detach_argv(self.dev), check=False, timeout=20)
        except Exception:
            pass

    def _set(self, slot: int, value: int) -> None:
        self.testbed.run(self.at, ["bpftool", "map", "update", "id", str(self.map_id),
                                     "key", *_bytes("<I", slot), "value", *_bytes("<Q", value)])

    def set_loss(self, loss) -> None:
        """loss: a ratio (Bernoulli), or a Gilbert-Elliott model (topologies/loss/__init__.py)."""
        if isinstance(loss, (int, float)):
            self._set(P_LOSS, threshold(loss))
            self._set(MODE, BERNOULLI if loss > 0 else PASS)
            return
        self._set(P_LOSS, threshold(loss.loss_good))
        self._set(P_GOOD_BAD, threshold(loss.p))
        self._set(P_BAD_GOOD, threshold(loss.r))
        self._set(P_LOSS_BAD, threshold(loss.loss_bad))
        self._set(MODE, GILBERT)

    def set_down(self, down: bool) -> None:
        self._set(DOWN, 1 if down else 0)

    def counts(self) -> dict[str, int]:
        """dropped (at random), passed, down_dropped (while the link was down), exempt (packets of a control
        connection, which random loss leaves alone: loss.bpf.c): totals since attach."""
        out = self.testbed.run(self.at, ["bpftool", "-j", "map", "dump", "id", str(self.map_id)],
                               check=False, timeout=COUNTS_TIMEOUT_S).stdout
        try:
            entries = {e["formatted"]["key"]: e["formatted"]["value"] for e in json.loads(out or "[]")}
        except (json.JSONDecodeError, KeyError):
            return {}
        return {"dropped": entries.get(DROPPED, 0), "passed": entries.get(PASSED, 0),
                "down_dropped": entries.get(DOWN_DROPPED, 0), "exempt": entries.get(EXEMPT, 0)}


def attach_all(testbed, points, commands: Commands) -> dict[tuple[str, str, str], LinkDropper]:
    """The program on every drop point's egress (topologies/loss plan()), each with its link's loss set."""
    if not points:
        return {}
    obj = build(commands)
    out = {}
    for p in points:
        # node's interface toward peer (egress), or peer's toward node (ingress)
        dev = testbed.egress_device(p.node, p.peer) if p.hook == "egress" else testbed.egress_device(p.peer, p.node)
        d = LinkDropper(testbed, p.node, p.peer, dev, p.hook)
        d.attach(obj)
        d.set_loss(p.loss)
        out[p.key] = d
    return out
