"""Ethernet flow control on real NICs through ethtool: enable, verify, read the counters, restore.

    ethtool -A DEV autoneg on|off rx on|off tx on|off     set
    ethtool -a DEV                                         read back (Autonegotiate, RX, TX)
    ethtool -I -a DEV                                      + statistics: tx_pause_frames, rx_pause_frames
    ethtool -S DEV                                         driver counters; those meaning PAUSE are normalised

rx on: the NIC honours PAUSE frames it receives (stops transmitting); tx on: it sends them when its receive
buffer fills. Many drivers (veth, virtio_net, most cloud NICs) implement no pause API at all: that is a clear
error naming interface and driver, found before anything is set up, unless the spec says `mode: auto`, where
`resolve_mode` falls back to the emulated controller and says so in a note for the archive.

The same code serves every place a NIC can be: `Ethtool(commands, ns)` runs ethtool in a namespace of this
machine, `Ethtool.on(testbed, node)` on the testbed's node (a netns node's namespace; a hosts node's machine over
SSH), and errors name the place (testbed.where(node): namespace, or inventory host and node) with the interface.
"""
from __future__ import annotations

import re
import subprocess
import time
from dataclasses import asdict, dataclass

from ccrig.commands import Commands, Local, Node
from ccrig.errors import InputError, RunError
from ccrig.samples import Sample

# the way out an unsupported-interface error gives, by where the interface is
NAMESPACE_WAY_OUT = "expected a NIC with the pause API, or pause.mode: emulated (or auto) on emulated links"
HOSTS_WAY_OUT = ("expected a NIC with the pause API (e1000e, igb, ixgbe, i40e, ice, mlx5_core, bnxt_en, tg3, ...) on "
                 "Linux hosts: map the pause_chain's n1 and n2 to router hosts whose link-B NICs have flow control, "
                 "or use pause.mode emulated (or auto): the XOFF/XON controller on n2's host shaping n1's link")

# the driver counters of `ethtool -S` that count PAUSE frames, by driver, as (regex, normalised name)
_E1000_FAMILY = [(r"rx_flow_control_xon", "rx_xon"), (r"rx_flow_control_xoff", "rx_xoff"),
                 (r"tx_flow_control_xon", "tx_xon"), (r"tx_flow_control_xoff", "tx_xoff")]
_LINK_XON = [(r"(port\.)?link_xon_rx", "rx_xon"), (r"(port\.)?link_xoff_rx", "rx_xoff"),
             (r"(port\.)?link_xon_tx", "tx_xon"), (r"(port\.)?link_xoff_tx", "tx_xoff")]
DRIVER_COUNTERS: dict[str, list[tuple[str, str]]] = {
    "e1000": _E1000_FAMILY, "e1000e": _E1000_FAMILY, "igb": _E1000_FAMILY, "igc": _E1000_FAMILY,
    "ixgbe": [(r"lxon_rx_count", "rx_xon"), (r"lxoff_rx_count", "rx_xoff"),
              (r"lxon_tx_count", "tx_xon"), (r"lxoff_tx_count", "tx_xoff")],
    "i40e": _LINK_XON, "ice": _LINK_XON,
    "mlx5_core": [(r"rx_pause_ctrl_phy", "rx_pause"), (r"tx_pause_ctrl_phy", "tx_pause")],
    "mlx4_en": [(r"rx_pause", "rx_pause"), (r"tx_pause", "tx_pause")],
    "bnxt_en": [(r"rx_pause_frames", "rx_pause"), (r"tx_pause_frames", "tx_pause")],
    "tg3": [(r"rx_xon_pause_rcvd", "rx_xon"), (r"rx_xoff_pause_rcvd", "rx_xoff"),
            (r"tx_xon_sent", "tx_xon"), (r"tx_xoff_sent", "tx_xoff")],
}
# any other driver: counters named like these
GENERIC_COUNTERS = [(r"rx_pause(_frames)?", "rx_pause"), (r"tx_pause(_frames)?", "tx_pause"),
                    (r"rx_xon\w*", "rx_xon"), (r"rx_xoff\w*", "rx_xoff"),
                    (r"tx_xon\w*", "tx_xon"), (r"tx_xoff\w*", "tx_xoff")]


@dataclass(frozen=True)
class PauseParams:
    autoneg: bool
    rx: bool
    tx: bool


def normalise_counters(driver: str, counters: dict[str, int]) -> dict[str, int]:
    """The PAUSE counters among a driver's `ethtool -S` counters, as rx_xon, rx_xoff, tx_xon, tx_xoff
    (where the NIC tells them apart) and rx_pause, tx_pause (their sum, or the NIC's own total)."""
    table = DRIVER_COUNTERS.get(driver, GENERIC_COUNTERS)
    out: dict[str, int] = {}
    for name, value in counters.items():
        for pattern, norm in table:
            if re.fullmatch(pattern, name):
                out[norm] = out.get(norm, 0) + value
                break
    for side in ("rx", "tx"):
        if f"{side}_pause" not in out and (f"{side}_xon" in out or f"{side}_xoff" in out):
            out[f"{side}_pause"] = out.get(f"{side}_xon", 0) + out.get(f"{side}_xoff", 0)
    return out


def parse_stats_text(text: str) -> dict[str, int]:
    """`ethtool -S` output -> {counter: value}."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*([^:]+):\s*(-?\d+)\s*", line)
        if m:
            out[m.group(1).strip()] = int(m.group(2))
    return out


class Ethtool:
    """ethtool on the interfaces of one node, wherever the node is. One code path for every place: all it
    needs is the node (a ccrig.commands.Node, whose run returns the CompletedProcess) and a name for the place
    that errors can give.

        Ethtool(commands, ns)        a network namespace of this machine (ns None: this one)
        Ethtool.on(testbed, node)    a testbed's node: netns runs it in the node's namespace, hosts over SSH
                                     on the node's machine (as root)
    """

    def __init__(self, commands: Commands | None = None, ns: str | None = None, *, node: Node | None = None,
                 place: str | None = None, way_out: str = NAMESPACE_WAY_OUT):
        if node is None:
            if commands is None:
                raise ValueError("Ethtool: needs commands (with ns) or node")
            node = Local(commands, ns)
            place = place or (f"namespace {ns}" if ns else None)
        self.node, self.place, self.way_out = node, place, way_out
        self._drivers: dict[str, str] = {}

    @classmethod
    def on(cls, testbed, node: str) -> "Ethtool":
        """ethtool on a testbed's node (netns: the node's namespace; hosts: SSH), its errors naming the place as
        the testbed does and giving the way out for where its NICs are (real ones: hosts)."""
        return cls(node=testbed.node(node), place=testbed.where(node),
                   way_out=HOSTS_WAY_OUT if testbed.real_nics else NAMESPACE_WAY_OUT)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        """argv on the node, never raising on a non-zero exit."""
        return self.node.run(argv, check=False)

    def _where(self, dev: str) -> str:
        return f"{dev} ({self.place})" if self.place else dev

    def exists(self, dev: str) -> bool:
        return self.run(["ip", "link", "show", "dev", dev]).returncode == 0

    def driver(self, dev: str) -> str:
        if dev not in self._drivers:
            m = re.search(r"^driver:\s*(\S+)", self.run(["ethtool", "-i", dev]).stdout, re.M)
            if not m:
                return "unknown"
            self._drivers[dev] = m.group(1)  # a driver does not change under a run: asked once
        return self._drivers[dev]

    def carrier(self, dev: str) -> bool:
        """Whether the link is up at the physical layer (the NIC has carrier)."""
        out = self.run(["ip", "-o", "link", "show", "dev", dev]).stdout
        m = re.search(r"<([^>]*)>", out)
        return bool(m) and "LOWER_UP" in m.group(1).split(",")

    def _pause(self, dev: str, stats: bool) -> dict:
        """`ethtool [-I] -a DEV` as {"autonegotiate", "rx", "tx": bool, "statistics": {name: int}}.

        The text output is parsed, not --json: ethtool 6.1's JSON for -a prints true for every setting
        whatever the NIC says (seen on e1000e: text "RX: off", JSON "rx": true)."""
        argv = ["ethtool", *(["-I"] if stats else []), "-a", dev]
        p = self.run(argv)
        out: dict = {"statistics": {}}
        for line in p.stdout.splitlines():
            m = re.fullmatch(r"(Autonegotiate|RX|TX):\s*(on|off)\s*", line.strip())
            if m:
                out[{"Autonegotiate": "autonegotiate", "RX": "rx", "TX": "tx"}[m.group(1)]] = m.group(2) == "on"
            m = re.fullmatch(r"([rt]x_pause_frames):\s*(\d+)", line.strip())
            if m:
                out["statistics"][m.group(1)] = int(m.group(2))
        if p.returncode != 0 or not {"autonegotiate", "rx", "tx"} <= set(out):
            # only now ask whether the interface is there at all: one command fewer on every good read
            if not self.exists(dev):
                raise InputError(f"pause: interface {self._where(dev)} does not exist")
            reason = (p.stderr.strip().splitlines() or ["no pause parameters"])[-1]
            reason = reason.removeprefix("netlink error: ")
            raise InputError(f"pause: interface {self._where(dev)} (driver {self.driver(dev)}) does not support "
                             f"Ethernet flow control: ethtool -a: {reason}; {self.way_out}")
        return out

    def get(self, dev: str) -> PauseParams:
        d = self._pause(dev, stats=False)
        return PauseParams(bool(d.get("autonegotiate")), bool(d.get("rx")), bool(d.get("tx")))

    def supported(self, dev: str) -> bool:
        try:
            self.get(dev)
            return True
        except InputError:
            return False

    def set(self, dev: str, want: PauseParams, now: PauseParams | None = None) -> PauseParams:
        """Sets the pause parameters and reads them back; a driver that silently ignores part is an error.
        Settings already in force are left alone: on most NICs ethtool -A renegotiates the link (carrier
        drops for a second or more) even when nothing changes. now: the settings the caller just read."""
        if now is None:
            now = self.get(dev)  # unsupported or missing: the clear error, before changing anything
        if now == want:
            return now
        argv = self.set_argv(dev, want)
        p = self.run(argv)
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["no message"])[-1]
            raise RunError(f"pause: ethtool -A {self._where(dev)} (driver {self.driver(dev)}) exited "
                           f"{p.returncode}: {msg}")
        got = self.get(dev)
        if (got.rx, got.tx) != (want.rx, want.tx) or (not want.autoneg and got.autoneg):
            raise RunError(f"pause: {self._where(dev)} (driver {self.driver(dev)}) reads back {asdict(got)} "
                           f"after ethtool -A asked for {asdict(want)}")
        return got

    @staticmethod
    def set_argv(dev: str, want: PauseParams) -> list[str]:
        return ["ethtool", "-A", dev, "autoneg", _onoff(want.autoneg), "rx", _onoff(want.rx), "tx", _onoff(want.tx)]

    def pause_stats(self, dev: str) -> dict[str, int]:
        """The standard pause statistics (ethtool -I -a): tx_pause_frames, rx_pause_frames, where the driver
        reports them (an empty dict where it does not)."""
        return self._pause(dev, stats=True)["statistics"]

    def driver_counters(self, dev: str) -> dict[str, int]:
        """The driver's own counters of `ethtool -S` that mean PAUSE, normalised (see normalise_counters)."""
        p = self.run(["ethtool", "-S", dev])
        return normalise_counters(self.driver(dev), parse_stats_text(p.stdout)) if p.returncode == 0 else {}

    def counters(self, dev: str) -> dict[str, int]:
        """Everything PAUSE-related we can read: standard statistics and normalised driver counters."""
        return {**{f"driver_{k}": v for k, v in self.driver_counters(dev).items()}, **self.pause_stats(dev)}


def ethtool_at(where: Ethtool | str | None, commands: Commands | None) -> Ethtool:
    """where: an Ethtool (any place), or a namespace of this machine (None: this one)."""
    return where if isinstance(where, Ethtool) else Ethtool(commands, where)


def wait_carrier(nics: list[tuple[Ethtool, str]], timeout: float = 30.0) -> list[str]:
    """Waits until every (tool, interface) has carrier again after ethtool -A: most NICs renegotiate the link
    when their pause settings change (the emulated e1000e under TCG for seconds), and a run that starts its
    traffic meanwhile measures a dead link. The drop comes a moment after the change, hence the first pause.
    Returns the interfaces still without carrier at the timeout."""
    if not nics:
        return []
    time.sleep(0.5)
    deadline = time.monotonic() + timeout
    while True:
        down = [tool._where(dev) for tool, dev in nics if not tool.carrier(dev)]
        if not down or time.monotonic() > deadline:
            return down
        time.sleep(0.2)


def _onoff(b: bool) -> str:
    return "on" if b else "off"


class NicPause:
    """Enables flow control on a set of interfaces for a run and puts every one back as it was.

    with NicPause(commands) as nics:
        nics.enable(ns, dev, PauseParams(autoneg=False, rx=True, tx=True))        # a namespace here
        nics.enable(Ethtool.on(testbed, node), dev, PauseParams(...))             # any testbed's node
    """

    def __init__(self, commands: Commands | None = None):
        self.commands = commands
        self.saved: list[tuple[Ethtool, str, PauseParams]] = []
        self.changed: list[tuple[Ethtool, str]] = []  # the interfaces whose settings ethtool -A changed

    def enable(self, where: Ethtool | str | None, dev: str, want: PauseParams, undo=None) -> PauseParams:
        """Sets want on dev, keeping the original for restore(); undo(argv), if given, first receives the
        command that would put the original back (for `ccrig clean` should this process die)."""
        tool = ethtool_at(where, self.commands)
        original = tool.get(dev)
        self.saved.append((tool, dev, original))
        if undo is not None:
            undo(tool.set_argv(dev, original))
        got = tool.set(dev, want, now=original)
        if got != original:
            self.changed.append((tool, dev))
        return got

    def restore(self) -> list[str]:
        """Puts every interface back; returns the problems (it never raises: it runs on teardown)."""
        problems = []
        while self.saved:
            tool, dev, original = self.saved.pop()
            try:
                tool.set(dev, original)
            except Exception as e:  # noqa: BLE001 - teardown reports, never raises
                problems.append(str(e))
        self.changed.clear()
        return problems

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()


def resolve_mode(mode: str, devices: list[tuple[Ethtool | str | None, str]],
                 commands: Commands | None = None) -> tuple[str, str | None]:
    """The PAUSE mode a run uses, and a note for the archive when `auto` had to fall back.

    devices: the (where, interface) pairs that must support the pause API for ethtool/frames modes, where an
    Ethtool (Ethtool.on(testbed, node)) or a namespace of this machine."""
    if mode == "emulated":
        return mode, None
    unsupported = []
    for where, dev in devices:
        tool = ethtool_at(where, commands)
        try:
            tool.get(dev)
        except InputError:
            if mode != "auto" or not tool.exists(dev):
                raise
            unsupported.append(f"{dev} (driver {tool.driver(dev)})")
    if not unsupported:
        return ("ethtool" if mode == "auto" else mode), None
    return "emulated", (f"pause.mode auto: {', '.join(unsupported)} implement no Ethernet flow control; "
                        f"the emulated XOFF/XON controller shapes the link instead")


# --- Prometheus ---------------------------------------------------------------------------------------------

NIC_HELP = {
    "pause_nic_frames_total": ("counter", "PAUSE frames a NIC received (direction rx) or sent (tx): the standard "
                                          "statistics of ethtool -I -a, else the driver's own counters (source)"),
    "pause_nic_xoff_frames_total": ("counter", "XOFF PAUSE frames (pause time > 0), where the driver counts them "
                                               "apart (ethtool -S)"),
    "pause_nic_xon_frames_total": ("counter", "XON PAUSE frames (pause time 0), where the driver counts them apart "
                                              "(ethtool -S)"),
    "pause_nic_enabled": ("gauge", "1 where the NIC's flow control setting is on: rx (honours PAUSE), tx (sends "
                                   "it), autoneg (negotiated with the link partner)"),
}


def nic_samples(counters: dict[str, int], settings: PauseParams | None, labels: dict,
                ts: float | None = None) -> list:
    """One NIC's PAUSE state as experiments.exporter Samples (labels: the run's, plus node and dev). One frames
    series per direction, so a sum over labels counts no frame twice: the standard statistic where the driver
    reports it, else the driver's total."""
    out = []
    for d in ("rx", "tx"):
        if f"{d}_pause_frames" in counters:
            value, source = counters[f"{d}_pause_frames"], "standard"
        elif f"driver_{d}_pause" in counters:
            value, source = counters[f"driver_{d}_pause"], "driver"
        else:
            value = None
        if value is not None:
            out.append(Sample("pause_nic_frames_total", {**labels, "direction": d, "source": source}, value, ts))
        for kind in ("xon", "xoff"):
            if f"driver_{d}_{kind}" in counters:
                out.append(Sample(f"pause_nic_{kind}_frames_total", {**labels, "direction": d},
                                  counters[f"driver_{d}_{kind}"], ts))
    if settings is not None:
        for name, on in (("rx", settings.rx), ("tx", settings.tx), ("autoneg", settings.autoneg)):
            out.append(Sample("pause_nic_enabled", {**labels, "setting": name}, 1.0 if on else 0.0, ts))
    return out
