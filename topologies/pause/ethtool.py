"""Ethernet flow control on real NICs through ethtool: enable, verify, read the counters, restore.

    ethtool -A DEV autoneg on|off rx on|off tx on|off     set
    ethtool -a DEV                                         read back (Autonegotiate, RX, TX)
    ethtool -I -a DEV                                      + statistics: tx_pause_frames, rx_pause_frames
    ethtool -S DEV                                         driver counters; those meaning PAUSE are normalised

rx on: the NIC honours PAUSE frames it receives (stops transmitting); tx on: it sends them when its receive
buffer fills. Many drivers (veth, virtio_net, most cloud NICs) implement no pause API at all: that is a clear
error naming interface and driver, found before anything is set up, unless the spec says `mode: auto`, where
`resolve_mode` falls back to the emulated controller and says so in a note for the archive.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from experiments.commands import Commands
from experiments.errors import InputError, RunError

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
    """ethtool on the interfaces of one node (ns: its network namespace, None: this one)."""

    def __init__(self, commands: Commands, ns: str | None = None):
        self.commands, self.ns = commands, ns

    def _where(self, dev: str) -> str:
        return f"{dev} (namespace {self.ns})" if self.ns else dev

    def exists(self, dev: str) -> bool:
        return self.commands.ok(["ip", "link", "show", "dev", dev], ns=self.ns)

    def driver(self, dev: str) -> str:
        out = self.commands.run(["ethtool", "-i", dev], ns=self.ns, check=False).stdout
        m = re.search(r"^driver:\s*(\S+)", out, re.M)
        return m.group(1) if m else "unknown"

    def _pause(self, dev: str, stats: bool) -> dict:
        """`ethtool [-I] -a DEV` as {"autonegotiate", "rx", "tx": bool, "statistics": {name: int}}.

        The text output is parsed, not --json: ethtool 6.1's JSON for -a prints true for every setting
        whatever the NIC says (seen on e1000e: text "RX: off", JSON "rx": true)."""
        if not self.exists(dev):
            raise InputError(f"pause: interface {self._where(dev)} does not exist")
        argv = ["ethtool", *(["-I"] if stats else []), "-a", dev]
        p = self.commands.run(argv, ns=self.ns, check=False)
        out: dict = {"statistics": {}}
        for line in p.stdout.splitlines():
            m = re.fullmatch(r"(Autonegotiate|RX|TX):\s*(on|off)\s*", line.strip())
            if m:
                out[{"Autonegotiate": "autonegotiate", "RX": "rx", "TX": "tx"}[m.group(1)]] = m.group(2) == "on"
            m = re.fullmatch(r"([rt]x_pause_frames):\s*(\d+)", line.strip())
            if m:
                out["statistics"][m.group(1)] = int(m.group(2))
        if p.returncode != 0 or not {"autonegotiate", "rx", "tx"} <= set(out):
            reason = (p.stderr.strip().splitlines() or ["no pause parameters"])[-1]
            reason = reason.removeprefix("netlink error: ")
            raise InputError(f"pause: interface {self._where(dev)} (driver {self.driver(dev)}) does not support "
                             f"Ethernet flow control: ethtool -a: {reason}; expected a NIC with the pause API, "
                             f"or pause.mode: emulated (or auto) on emulated links")
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

    def set(self, dev: str, want: PauseParams) -> PauseParams:
        """Sets the pause parameters and reads them back; a driver that silently ignores part is an error."""
        self.get(dev)  # unsupported or missing: the clear error, before changing anything
        argv = ["ethtool", "-A", dev, "autoneg", _onoff(want.autoneg), "rx", _onoff(want.rx), "tx", _onoff(want.tx)]
        p = self.commands.run(argv, ns=self.ns, check=False)
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["no message"])[-1]
            raise RunError(f"pause: ethtool -A {self._where(dev)} (driver {self.driver(dev)}) exited "
                           f"{p.returncode}: {msg}")
        got = self.get(dev)
        if (got.rx, got.tx) != (want.rx, want.tx) or (not want.autoneg and got.autoneg):
            raise RunError(f"pause: {self._where(dev)} (driver {self.driver(dev)}) reads back {asdict(got)} "
                           f"after ethtool -A asked for {asdict(want)}")
        return got

    def pause_stats(self, dev: str) -> dict[str, int]:
        """The standard pause statistics (ethtool -I -a): tx_pause_frames, rx_pause_frames, where the driver
        reports them (an empty dict where it does not)."""
        return self._pause(dev, stats=True)["statistics"]

    def driver_counters(self, dev: str) -> dict[str, int]:
        """The driver's own counters of `ethtool -S` that mean PAUSE, normalised (see normalise_counters)."""
        p = self.commands.run(["ethtool", "-S", dev], ns=self.ns, check=False)
        return normalise_counters(self.driver(dev), parse_stats_text(p.stdout)) if p.returncode == 0 else {}

    def counters(self, dev: str) -> dict[str, int]:
        """Everything PAUSE-related we can read: standard statistics and normalised driver counters."""
        return {**{f"driver_{k}": v for k, v in self.driver_counters(dev).items()}, **self.pause_stats(dev)}


def _onoff(b: bool) -> str:
    return "on" if b else "off"


class NicPause:
    """Enables flow control on a set of interfaces for a run and puts every one back as it was.

    with NicPause(commands) as nics:
        nics.enable(ns, dev, PauseParams(autoneg=False, rx=True, tx=True))
    """

    def __init__(self, commands: Commands):
        self.commands = commands
        self.saved: list[tuple[str | None, str, PauseParams]] = []

    def enable(self, ns: str | None, dev: str, want: PauseParams) -> PauseParams:
        tool = Ethtool(self.commands, ns)
        original = tool.get(dev)
        self.saved.append((ns, dev, original))
        return tool.set(dev, want)

    def restore(self) -> list[str]:
        """Puts every interface back; returns the problems (it never raises: it runs on teardown)."""
        problems = []
        while self.saved:
            ns, dev, original = self.saved.pop()
            try:
                Ethtool(self.commands, ns).set(dev, original)
            except Exception as e:  # noqa: BLE001 - teardown reports, never raises
                problems.append(str(e))
        return problems

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()


def resolve_mode(mode: str, devices: list[tuple[str | None, str]], commands: Commands) -> tuple[str, str | None]:
    """The PAUSE mode a run uses, and a note for the archive when `auto` had to fall back.

    devices: the (namespace, interface) pairs that must support the pause API for ethtool/frames modes."""
    if mode == "emulated":
        return mode, None
    unsupported = []
    for ns, dev in devices:
        tool = Ethtool(commands, ns)
        try:
            tool.get(dev)
        except InputError as e:
            if mode != "auto" or not tool.exists(dev):
                raise
            unsupported.append(f"{dev} (driver {tool.driver(dev)})")
    if not unsupported:
        return ("ethtool" if mode == "auto" else mode), None
    return "emulated", (f"pause.mode auto: {', '.join(unsupported)} implement no Ethernet flow control; "
                        f"the emulated XOFF/XON controller shapes the link instead")
