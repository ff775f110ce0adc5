"""Ethernet PAUSE (IEEE 802.3x): the program that runs beside the links (agent/: the XOFF/XON state machine,
the controller loop with its actuators — tbf on emulated links, real MAC control frames — and node 1's agent),
the runner's side that starts and reads it (emulated.py), and NIC flow control through ethtool (ethtool.py).

For a pause_chain topology the runner calls `chain_plan` (mode, auto's note, NIC settings; on the hosts
testbed already in preflight, over SSH: experiments/preflight._hosts), applies the NIC settings with
ethtool.NicPause, and, unless the NICs do it all, `chain_controller` for an EmulatedPause to start() before
traffic and stop() after: on this machine where the nodes are namespaces (netns, vm), else on node 2's host
with an agent on node 1's (hosts).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ccrig.commands import Commands
from ccrig.errors import InputError, RunError
from .agent.config import EmulatedPauseConfig
from .emulated import EmulatedPause, OnTestbed, agent_zip
from .ethtool import Ethtool, PauseParams, resolve_mode


def chain_config(spec, topo, testbed, actuator: str = "tbf") -> EmulatedPauseConfig:
    """The controller's settings for a PauseChainSpec realised on a testbed.

    Where the nodes are network namespaces of this machine (netns, and netns inside the vm testbed;
    testbed.ns(node) names them) the controller reaches both from here. Where they are separate machines
    (hosts), it runs on node 2's and signals node 1's rates to an agent there, at node 1's address on link B.
    actuator tbf shapes node 1's link B (mode emulated); frames sends 802.3x frames from node 2's interface
    on link B to node 1's (mode frames: node 1's NIC must have rx pause on)."""
    p = spec.pause
    if p is None:
        raise InputError("topology.pause: not set; the pause_chain has no PAUSE to control")
    ns = getattr(testbed, "ns", None)
    (n1, toward2), (n2, toward_c) = spec.pause_nodes(topo)
    signal_to = signal_from = None
    if ns is None and actuator == "tbf":
        signal_to = next(x.address for x in topo.interfaces()[n1] if x.peer == n2)
        signal_from = next(x.address for x in topo.interfaces()[n2] if x.peer == n1)
    return EmulatedPauseConfig(
        down_ns=ns(n2) if ns else None, down_dev=testbed.egress_device(n2, toward_c),
        up_ns=ns(n1) if ns else None, up_dev=testbed.egress_device(n1, toward2),
        high=p.high, low=p.t2,
        rate_bps=spec.rate_bps(spec.link_b.rate), paused_bps=spec.rate_bps(p.paused_rate),
        up_limit=spec.link_b.buffer.packets, down_limit=spec.link_c.buffer.packets,
        departure_pps=spec.rate_bps(spec.link_c.rate) / (8 * spec.wire), wire_bytes=spec.wire,
        quanta=p.quanta, refresh=p.refresh, poll=p.poll,
        actuator=actuator, frames_dev=testbed.egress_device(n2, n1) if actuator == "frames" else None,
        signal_to=signal_to, signal_from=signal_from)


def chain_controller(spec, topo, testbed, commands: Commands, events_csv: Path | None = None,
                     actuator: str = "tbf", workdir: Path | None = None) -> EmulatedPause:
    """The controller for a run; on a testbed of separate machines its program is written to workdir (the
    repetition's archive: the zip the hosts ran) and copied to node 1's and node 2's hosts."""
    cfg = chain_config(spec, topo, testbed, actuator)
    if getattr(testbed, "ns", None) is not None:
        return EmulatedPause(cfg, commands, events_csv)
    if workdir is None:
        raise RunError(f"PAUSE controller on the {testbed.kind} testbed: needs a directory for its program")
    (n1, _), (n2, _) = spec.pause_nodes(topo)
    where = OnTestbed(testbed, n1, n2, agent_zip(workdir / "pause_agent.pyz"))
    return EmulatedPause(cfg, commands, events_csv, where)


@dataclass
class NicSetting:
    """Flow control one NIC of link B gets for a run: node, its interface, the Ethtool that reaches it there."""
    node: str
    tool: Ethtool
    dev: str
    want: PauseParams


@dataclass
class ChainPlan:
    """How a run realises the pause_chain's PAUSE: the mode in force (after `auto`), the note for the archive
    when auto fell back, the NIC settings to apply (and restore) with NicPause, and the controller's actuator
    (None: the NICs' own flow control does it all)."""
    mode: str
    note: str | None
    nic_settings: list[NicSetting]
    actuator: str | None


def chain_plan(spec, topo, testbed, commands: Commands) -> ChainPlan:
    """Decides, before anything is set up, how PAUSE runs on link B; unsupported NICs are an InputError here.
    It only reads (ethtool -i, ethtool -a, ip link): a testbed that can run commands on its nodes before up()
    (hosts after preflight() connected) has its NICs checked in preflight.

    emulated: the controller shapes link B (tbf). frames: node 1's NIC honours PAUSE (rx on) and the controller
    sends real frames from node 2's NIC. ethtool: both NICs' own flow control (node 2's NIC sends PAUSE when its
    receive buffer fills: hardware thresholds, not T1/T2). auto: ethtool where both NICs support it, else
    emulated, with a note (virtual NICs: cloud VMs, veth)."""
    p = spec.pause
    (n1, toward2), _ = spec.pause_nodes(topo)
    up = NicSetting(n1, Ethtool.on(testbed, n1), testbed.egress_device(n1, toward2),
                    PauseParams(autoneg=False, rx=True, tx=False))
    down = NicSetting(toward2, Ethtool.on(testbed, toward2), testbed.egress_device(toward2, n1),
                      PauseParams(autoneg=False, rx=False, tx=True))
    mode, note = resolve_mode(p.mode, [(up.tool, up.dev), (down.tool, down.dev)])
    if mode == "emulated":
        return ChainPlan(mode, note, [], "tbf")
    if mode == "frames":
        return ChainPlan(mode, note, [up], "frames")
    return ChainPlan(mode, note, [up, down], None)
