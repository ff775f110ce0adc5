"""Which queue disciplines the running kernel has, found by trying them, so preflight can refuse a spec that
needs a missing one before anything is set up.

Each discipline is installed, as ccrig would render it, as the root qdisc of `lo` in a scratch network
namespace (no dummy or veth module needed), then removed with the namespace. Where the kernel loads
modules, `modprobe sch_X` runs first (tc would also ask the kernel to autoload, but only if modprobe is
found by the kernel's usermode helper). A kernel's set does not change while it runs, so the answer is
cached per kernel release for the life of the process.
"""
from __future__ import annotations

import os
import shlex
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

from ccrig.commands import Commands, Local, Node, in_netns
from ccrig.errors import InputError, RunError
from ccrig.units import Size
from . import available as disciplines

# the other disciplines a run can need, besides the bottleneck's: the shaper and the delay/loss line
OTHER: dict[str, tuple[str, list[str]]] = {
    "htb": ("sch_htb", ["htb", "default", "1"]),
    # a burst above lo's MTU (65536): the probe runs on a scratch namespace's lo, and a smaller one makes the kernel warn
    "tbf": ("sch_tbf", ["tbf", "rate", "10mbit", "burst", "70000", "latency", "50ms"]),
    "netem": ("sch_netem", ["netem", "delay", "1ms"]),
}

_cache: dict[str, frozenset[str]] = {}


def probes() -> dict[str, tuple[str, list[str]]]:
    """kind -> (module, qdisc args) for everything the probe tries; the disciplines render their own defaults."""
    out = {kind: (cls.module, cls().qdisc_args(Size(packets=100), 10e6, 1500))
           for kind, cls in disciplines().items()}
    out.update(OTHER)
    return out


def modules_supported() -> bool:
    """Whether the running kernel can load modules at all (no /proc/modules without CONFIG_MODULES)."""
    return Path("/proc/modules").exists()


def available(commands: Commands, prefix: str) -> set[str]:
    """The disciplines (every kind plus htb, tbf, netem) the running kernel can install."""
    release = os.uname().release
    if release not in _cache:
        _cache[release] = frozenset(_try_all(Local(commands), f"{prefix}-qprobe", modules_supported()))
    return set(_cache[release])


def available_on(testbed, node: str, prefix: str, kinds) -> tuple[str, set[str]]:
    """The kernel release of node's machine (a host of the hosts testbed, over its connection) and which of
    kinds that kernel can install, probed there the same way."""
    on = testbed.node(node)
    release = on.run(["uname", "-r"]).stdout.strip()
    loadable = on.run(["test", "-e", "/proc/modules"], check=False).returncode == 0
    return release, _try_all(on, f"{prefix}-qprobe", loadable, set(kinds))


def _try_all(node: Node, ns: str, loadable: bool, kinds: set[str] | None = None) -> set[str]:
    """Tries the disciplines on the machine of node (this one, or a host); ns is the scratch namespace made
    there; kinds: the disciplines to try (None: all)."""
    def ok(argv):
        return node.run(argv, check=False).returncode == 0

    tried = {kind: p for kind, p in probes().items() if kinds is None or kind in kinds}
    found = set()
    ok(["ip", "netns", "del", ns])  # left by a probe of this prefix that was killed
    try:
        # inside the try: a Ctrl-C that lands while `ip netns add` runs or just after it returned must still
        # delete what it made (outside, such a namespace was left behind)
        node.run(["ip", "netns", "add", ns])
        # a command's own bound (60 s) is too tight for all of them in one shell: 26 tc and modprobe in a TCG guest
        # take 3 s idle and several times that on a loaded machine
        out = node.run(["sh", "-s"], input=_script(ns, tried, loadable), check=False,
                       timeout=60 + 10 * len(tried)).stdout
        said = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        for kind, (_, args) in tried.items():
            if kind not in said:
                raise RunError(f"probing {kind}: the probe's script ended before it (output: {out.strip()!r})")
            if said[kind] == "":
                found.add(kind)
            elif not _unknown_kind(said[kind]):
                # the kernel knows the kind but refused our parameters: a bug here, not a missing feature
                argv = ["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", *args]
                raise RunError(f"probing {kind}: {shlex.join(argv)} failed: {said[kind].strip()}")
    finally:
        with _signals_held():
            ok(["ip", "netns", "del", ns])
    return found


def _script(ns: str, tried: dict[str, tuple[str, list[str]]], loadable: bool) -> str:
    """One shell for every discipline: each a line `KIND<tab>` (installed) or `KIND<tab>tc's error`. A process per
    command took 8.6 s of a TCG guest's ccrig start (26 commands); a shell's are a third of that, and over SSH
    one connection instead of 26."""
    lines = []
    for kind, (module, args) in tried.items():
        if loadable and module:
            lines.append(f"modprobe -q {shlex.quote(module)}")
        add = shlex.join(in_netns(ns, ["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", *args]))
        lines.append(f"if err=$({add} 2>&1); then tc -n {shlex.quote(ns)} qdisc del dev lo root >/dev/null 2>&1; "
                     f"err=; else err=\"${{err:-exit $?}}\"; fi")
        lines.append(f"printf '%s\\t%s\\n' {shlex.quote(kind)} \"$(printf %s \"$err\" | tr '\\n\\t' '  ')\"")
    return "\n".join(lines) + "\n"


@contextmanager
def _signals_held():
    """SIGINT and SIGTERM that arrive within are noted and passed on once it is left (to the handlers the caller
    had): a signal's exception inside subprocess.run kills the command it waits on, and a teardown command killed
    half-way leaves what it was removing. Handlers, not a blocked mask: a signal sent to the process reaches
    whichever thread does not block it, and the main thread then raises anyway."""
    if threading.current_thread() is not threading.main_thread():   # handlers belong to the main thread
        yield
        return
    caught: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if caught:
            signal.raise_signal(caught[0])


def _unknown_kind(stderr: str) -> bool:
    """tc's answer when the kernel has no such discipline (with netlink extack, and without)."""
    return "kind is unknown" in stderr or "No such file or directory" in stderr


def module_of(kind: str) -> str:
    return probes()[kind][0] if kind in probes() else f"sch_{kind}"


def missing_message(kind: str, release: str, host: str | None = None) -> str:
    """One sentence: which discipline is missing, in which kernel (of which host, if not this machine), and the
    way out."""
    module = module_of(kind)
    if host is not None:
        return (f"queue discipline {kind!r} is not available in kernel {release} on {host}: load it there with "
                f"`modprobe {module}`, or give that host a kernel with {module} (a distribution kernel has it)")
    if release == os.uname().release and not modules_supported():
        way = (f"this kernel cannot load modules, so run on a distribution kernel with `testbed: vm` "
               f"(or use a kernel built with {module})")
    else:
        way = f"load it with `modprobe {module}`, or run on a distribution kernel with `testbed: vm`"
    return f"queue discipline {kind!r} is not available in kernel {release}: {way}"


def require(commands: Commands, prefix: str, kinds, where: str = "qdisc") -> None:
    """Raises InputError (exit 2) naming every needed discipline the running kernel lacks."""
    have = available(commands, prefix)
    release = os.uname().release
    missing = [k for k in dict.fromkeys(kinds) if k not in have]
    if missing:
        raise InputError(f"{where}: " + "; ".join(missing_message(k, release) for k in missing))
