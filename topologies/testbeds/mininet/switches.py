"""The switches a Mininet network's links cross: Linux bridges or Open vSwitch, and the OVS daemons' lifetime.

    mininet: {switch: auto}      # auto | lxbr | ovs | ovs-user

* `lxbr`: a Linux bridge (bridge-utils' brctl, as Mininet's LinuxBridge drives it): forwarding in the kernel's
  receive path, nothing to start.
* `ovs`: Open vSwitch with the kernel datapath (the `openvswitch` module), standalone learning bridges.
* `ovs-user`: Open vSwitch with the userspace datapath (`datapath_type=netdev`): ovs-vswitchd forwards every
  packet itself, for kernels without the module (this machine's).
* `auto`: `ovs` where the kernel has the module (Mininet's own default switch), else `lxbr` (kernel forwarding
  costs far less CPU than a userspace datapath on a small machine), else `ovs-user`.

Open vSwitch's daemons are the machine's: when they are not running ccrig starts them with a database of its own
under /run (the system's /etc/openvswitch may be read-only, e.g. in the vm guest) and stops them again when the
last ccrig run that needed them is done. Each run holds the daemons with a file named after its prefix, so
concurrent runs share them and `ccrig clean` can release the holds of runs that were killed.
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

# Debian's Mininet, imported absolutely (this package's own name is ccrig.topologies.testbeds.mininet)
from mininet.nodelib import LinuxBridge
from mininet.node import OVSBridge
from mininet.util import specialClass
from pydantic import BaseModel, ConfigDict

from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.needs import Need

SwitchKind = Literal["auto", "lxbr", "ovs", "ovs-user"]
KINDS = ("auto", "lxbr", "ovs", "ovs-user")

STATE = Path("/run/ccrig")
OVS_STATE = STATE / "ovs"
OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
OVS_RUNDIR = Path("/var/run/openvswitch")  # ovs-lib's default: where ovs-vsctl and Mininet look for the daemons


class MininetOptions(BaseModel):
    """The spec's `mininet:` section (used when `testbed: mininet`)."""
    model_config = ConfigDict(extra="forbid")
    switch: SwitchKind = "auto"


# --- what this machine offers ------------------------------------------------------------------------------

def ovs_installed() -> bool:
    return all(shutil.which(t) for t in ("ovs-vsctl", "ovs-vswitchd", "ovsdb-server")) and Path(OVS_CTL).exists()


def ovs_kernel_datapath(commands: Commands) -> bool:
    """The kernel has Open vSwitch's datapath: built in or loaded, or a module modprobe can load."""
    if Path("/sys/module/openvswitch").exists():
        return True
    return Path("/proc/modules").exists() and commands.ok(["modprobe", "-n", "-q", "openvswitch"])


def needs(kind: str, commands: Commands) -> list[Need]:
    """What switches of `kind` (not auto) need of this machine, each saying how to get it."""
    by = f"mininet.switch {kind}"
    out = []
    if kind == "lxbr":
        out.append(Need("the `brctl` command", by, shutil.which("brctl") is not None,
                        "install the Debian package bridge-utils (`make deps`)"))
    if kind in ("ovs", "ovs-user"):
        out.append(Need("Open vSwitch", by, ovs_installed(),
                        "install the Debian package openvswitch-switch (`make deps`)"))
    if kind == "ovs":
        out.append(Need("the Open vSwitch kernel datapath", by, ovs_kernel_datapath(commands),
                        f"kernel {platform.release()} has no openvswitch module: load it (`modprobe openvswitch`), "
                        f"use `mininet.switch: ovs-user` or `lxbr`, or the `vm` testbed"))
    return out


def choose(kind: str, commands: Commands) -> str:
    """The switch kind to use for `kind` (auto resolves to what this machine has)."""
    if kind != "auto":
        return kind
    if ovs_installed() and ovs_kernel_datapath(commands):
        return "ovs"
    if shutil.which("brctl"):
        return "lxbr"
    if ovs_installed():
        return "ovs-user"
    raise RunError("mininet.switch auto: neither bridge-utils (brctl) nor Open vSwitch is installed; "
                   "install bridge-utils and openvswitch-switch (`make deps`)")


def switch_class(kind: str, commands: Commands | None = None, group: int | None = None):
    """Mininet's class for switches of a chosen kind (not auto). With `commands` (the testbed's), Linux bridges
    start as BatchBridges: in one logged `ip -batch`, in device group `group`."""
    if kind == "lxbr":
        if commands is None:
            return LinuxBridge
        return type("BatchBridge", (BatchBridge,), {"commands": commands, "group": group})
    return specialClass(OVSBridge, defaults={"datapath": "user" if kind == "ovs-user" else "kernel"})


class BatchBridge(LinuxBridge):
    """Mininet's LinuxBridge, a network's bridges all started by one `ip -batch` (through Commands, so it is in
    commands.log) instead of five brctl/ifconfig commands per bridge through its shell (0.4 s for a 30-sender
    dumbbell's 61 bridges). `ip link add type bridge` makes the device `brctl addbr` makes (STP off, ports
    forwarding at once). The bridges and their ports join the run's device group: a bridge takes tens of
    milliseconds to delete one request at a time, `ip link del group` deletes them in one (clean.purge)."""
    commands: Commands = Commands(None)
    group: int | None = None

    def start(self, _controllers) -> None:
        pass  # batchStartup does it, for all bridges at once

    @classmethod
    def batchStartup(cls, switches, run=None):
        group = ["group", str(cls.group)] if cls.group else []
        lines = []
        for sw in switches:
            lines.append(["link", "add", "name", sw.name, *group, "type", "bridge"])
            # Mininet's LinuxBridge enslaves the interfaces named after the bridge: its ports, not a stray intf
            lines += [["link", "set", "dev", i.name, "master", sw.name, *group, "up"]
                      for i in sw.intfList() if sw.name in i.name]
            lines.append(["link", "set", "dev", sw.name, "up"])
        cls.commands.batch(["ip", "-batch", "-"], lines)
        return switches


# --- processes that own things -------------------------------------------------------------------------------

def owner() -> dict:
    """This process as the owner of something left in /run: pid and start time (pids are reused)."""
    return {"pid": os.getpid(), "start": _start_time(os.getpid())}


def owner_alive(rec: dict) -> bool:
    pid = rec.get("pid")
    return isinstance(pid, int) and _start_time(pid) is not None and _start_time(pid) == rec.get("start")


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields after the last ')' are fixed; starttime is 22nd
    return int(stat.rsplit(")", 1)[1].split()[19])


# --- the Open vSwitch daemons ----------------------------------------------------------------------------------

class OvsDaemons:
    """Starts ovsdb-server and ovs-vswitchd when they are not running, and stops them once no ccrig run holds
    them, only if ccrig started them (the `started` marker)."""

    def __init__(self, commands: Commands, root: Path = OVS_STATE):
        self.commands = commands
        self.root = root
        self.holders = root / "holders"
        self.marker = root / "started"
        # ccrig's own database and logs (ovs-lib reads these from the environment), so a read-only /etc (the
        # vm guest's) does not matter and the system's database is left alone
        self.ctl = ["env", f"OVS_SYSCONFDIR={root / 'etc'}", f"OVS_LOGDIR={root / 'log'}", OVS_CTL]

    @contextmanager
    def _locked(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def running(self) -> bool:
        # both daemons: ovs-vsctl answers with ovsdb-server alone, but bridges need ovs-vswitchd
        return self.commands.ok([*self.ctl, "status"], timeout=20)

    def hold(self, prefix: str) -> None:
        """Makes sure the daemons run and notes that the run `prefix` uses them."""
        with self._locked():
            if not self.running():
                self._start()
            self.holders.mkdir(parents=True, exist_ok=True)
            (self.holders / prefix).write_text(json.dumps(owner()))

    def release(self, prefix: str) -> list[str]:
        """Drops the run's hold (and those of runs that died); stops the daemons if ccrig started them and no
        run holds them any more. Never raises."""
        said = []
        try:
            with self._locked():
                (self.holders / prefix).unlink(missing_ok=True)
                said += self._stop_if_unused()
        except Exception as e:  # teardown is best effort
            said.append(f"could not release Open vSwitch: {e}")
        return said

    def release_dead(self, prefix: str) -> list[str]:
        """For `ccrig clean`: drops the holds of dead runs whose prefix starts with `prefix`."""
        said = []
        with self._locked():
            for h in sorted(self.holders.glob("*")) if self.holders.exists() else []:
                if (h.name + "-").startswith(prefix) and not owner_alive(read_json(h)):
                    h.unlink(missing_ok=True)
                    said.append(f"released the Open vSwitch hold of dead run {h.name}")
            said += self._stop_if_unused()
        return said

    def _live_holders(self) -> list[str]:
        live = []
        for h in self.holders.glob("*") if self.holders.exists() else []:
            if owner_alive(read_json(h)):
                live.append(h.name)
            else:
                h.unlink(missing_ok=True)
        return live

    def _start(self) -> None:
        (self.root / "etc" / "openvswitch").mkdir(parents=True, exist_ok=True)
        (self.root / "log").mkdir(parents=True, exist_ok=True)
        argv = [*self.ctl, "start", f"--system-id={uuid.uuid4()}", "--no-mlockall"]
        r = self.commands.run(argv, check=False, timeout=60)
        if r.returncode != 0 or not self.running():
            msg = (r.stderr or r.stdout).strip().splitlines()
            self.commands.run([*self.ctl, "stop"], check=False, timeout=60)
            raise RunError(f"could not start Open vSwitch ({OVS_CTL} start): {msg[-1] if msg else 'no output'}")
        self.marker.write_text(json.dumps(owner()))
        # the userspace datapath is part of the emulated wire: in the kernel, forwarding (softirq) runs before
        # any user process, so the switch ccrig started gets real-time priority; at nice -10 alone a busy
        # machine descheduled it for longer than a 100-packet bottleneck queue lasts and the link idled
        pid = (OVS_RUNDIR / "ovs-vswitchd.pid").read_text().strip()
        self.commands.run(["chrt", "--all-tasks", "--rr", "--pid", "1", pid], check=False)

    def _stop_if_unused(self) -> list[str]:
        if not self.marker.exists() or self._live_holders():
            return []
        self.commands.run([*self.ctl, "stop"], check=False, timeout=60)
        self.marker.unlink(missing_ok=True)
        shutil.rmtree(self.root / "etc", ignore_errors=True)
        shutil.rmtree(self.root / "log", ignore_errors=True)
        return ["stopped Open vSwitch (ccrig had started it)"]


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
