"""The project's own multi-host test bed on one machine: network namespaces as SSH hosts.

Every host is a network namespace `<prefix>-<host>` with
  - a management interface `mgmt0` on a bridge in the root namespace (the lab's management network): the
    controller (this process, Ansible) reaches the host's sshd there;
  - its own sshd (Debian openssh-server): its own config, host key and pid file, listening only on that
    namespace's management address, accepting one generated client key;
  - experiment interfaces cabled to other hosts by veth pairs, named like a lab's NICs (`lab0`, ...), so the
    inventory must map topology links to real interface names exactly as on a lab.
A "switch" is a namespace with a Linux bridge and no sshd: it stands for a hardware switch that is not ours
to configure (the bed may shape its ports, as a lab admin would configure a switch out of band).

Hosts log in as a generated operator user (shell /bin/sh, NOPASSWD sudo through /etc/sudoers.d/<prefix>), as
on a lab where ccrig's user needs sudo; `Host(user="root")` logs in as root instead, and add_user() makes a user
without sudo. (Root's own login shell here is bash with a slow ~/.bashrc, which sshd makes bash read for every
command; the operator's /bin/sh measures ccrig's per-command cost, not the machine's shell start-up.)

The bed writes an Ansible inventory (YAML) pointing at the hosts, with a known_hosts file holding their
generated host keys (StrictHostKeyChecking stays on). `down()` kills every sshd and process in the
namespaces, deletes them and the bridge, and removes any user it made; it never raises.

Names carry the prefix (default `ccrig<pid>`, or $CCRIG_TEST_PREFIX + pid) so nothing is mistaken for
someone else's. Traffic stays on this machine: 198.19.x.0/24 management addresses and the experiment links.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ccrig.commands import Commands
from ccrig.machine import cache_lock
from ccrig.topologies.testbeds.netns import namespaces, remove_namespace

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself, so it must be started by absolute path
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


_beds = itertools.count()


def bed_prefix() -> str:
    """A prefix unique to this process and bed: two letters count its beds (one letter came round again after 26
    beds of one xdist worker, and a bed then had an earlier one's names). Interface names stay within 15
    characters: ccrig + 5 digits + 2 letters + m + a host's index."""
    n = next(_beds)
    return _base() + f"{os.getpid() % 100000}{chr(97 + n // 26 % 26)}{chr(97 + n % 26)}"


def _base() -> str:
    return os.environ.get("CCRIG_TEST_PREFIX", "ccrig")


def machine_lock():
    """What beds share on this machine, one bed at a time: /etc/passwd (useradd and userdel refuse while another
    holds its lock) and the choice of a management subnet. Beds of different xdist workers start at once."""
    return cache_lock(".sshhosts.lock", Path("/run/lock"))


def sweep_lock():
    """One sweep at a time, and none while a test builds a bed under a dead pid on purpose: another xdist worker's
    bed start swept such a bed half built (CI: its bridge gone before its first host was cabled to it)."""
    return cache_lock(".sshhosts-sweep.lock", Path("/run/lock"))


def killed_beds() -> list[str]:
    """The prefixes of beds whose test process is gone: killed before its teardown (a CI run stopped by its
    limit, a SIGKILL), they left namespaces, sshd, users, a sudoers file, a bridge and a folder behind. A prefix
    whose pid (mod 100000) any running process has is kept: perhaps its bed is still in use."""
    name = re.compile(rf"{re.escape(_base())}(\d+)[a-z]{{2}}", re.IGNORECASE)   # users are the prefix case-folded
    seen = [Path("/run/netns").glob(f"{_base()}*"), Path("/tmp").glob(f"{_base()}*-bed"),
            Path("/etc/sudoers.d").glob(f"{_base()}*"), Path("/sys/class/net").glob(f"{_base()}*mg")]
    found = {m.group(0) for paths in seen for path in paths if (m := name.match(path.name))}
    found |= {m.group(0) for u in _users() if (m := name.match(u))}
    alive = alive_tags()
    return sorted(p for p in found if int(name.match(p).group(1)) not in alive)


def alive_tags() -> set[int]:
    """The pids of the running processes as bed prefixes carry them (mod 100000)."""
    return {int(pid) % 100000 for pid in os.listdir("/proc") if pid.isdigit()}


def _users() -> list[str]:
    return [line.split(":", 1)[0] for line in Path("/etc/passwd").read_text().splitlines()]


def sweep_killed_beds(commands: Commands) -> list[str]:
    """Removes what killed_beds() names (as down() would) and says what it removed."""
    with sweep_lock():
        return _sweep(commands)


def _sweep(commands: Commands) -> list[str]:
    said, users = [], _users()
    for prefix in killed_beds():
        bed = SshHosts([], prefix=prefix, commands=commands)
        lower = prefix.lower()
        bed.users = [u for u in users if u.startswith(lower)]
        bed.switches = [n[len(prefix) + 1:] for n in namespaces(f"{prefix}-")]   # down() removes them all
        bed.down()
        said.append(f"removed the test bed {prefix} of a killed test process")
    return said


@dataclass
class Host:
    name: str
    groups: list[str]
    node: str | None = None                         # the topology node it plays (ccrig_node)
    interfaces: dict[str, str] = field(default_factory=dict)  # peer node -> interface (ccrig_interfaces)
    user: str = "op"                                # "op": the bed's sudo operator; "root"; or a user
    extra: dict = field(default_factory=dict)       # more inventory variables
    address: str = ""                               # management address, set by up()


class SshHosts:
    """hosts: the SSH hosts; cables: (host_a, dev_a, host_b, dev_b) veth pairs; switches: namespaces with a
    bridge that cables may end on (their dev is the bridge port's name)."""

    def __init__(self, hosts: list[Host], cables: list[tuple[str, str, str, str]] = (),
                 switches: list[str] = (), prefix: str | None = None, commands: Commands | None = None):
        self.prefix = prefix or bed_prefix()
        # not under pytest's 0700 tmp_path: sshd reads a user's authorized keys with that user's rights
        self.dir = Path(f"/tmp/{self.prefix}-bed")
        self.hosts = {h.name: h for h in hosts}
        self.cables = list(cables)
        self.switches = list(switches)
        self.c = commands or Commands()
        self.bridge = f"{self.prefix}mg"
        self.subnet = ""
        self.key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.inventory = self.dir / "inventory.yml"
        self.sshd: dict[str, subprocess.Popen] = {}
        self.users: list[str] = []
        self.operator = self.user_name("op")
        self.sudoers = Path(f"/etc/sudoers.d/{self.prefix}")
        self.controller_vars: dict = {}

    # --- names ---------------------------------------------------------------------------------------
    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def user_name(self, suffix: str) -> str:
        # Debian's useradd wants lower case; still starts with the prefix, case folded
        return f"{self.prefix.lower()}{suffix}"

    # --- up ------------------------------------------------------------------------------------------
    def up(self) -> "SshHosts":
        sweep_killed_beds(self.c)
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        c = self.c
        self.dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self._add_operator()
        # the subnet is free until the bridge's address routes it: two beds starting at once (xdist workers) both
        # picked 198.19.200 and one's ssh reached the other's hosts (CI: "f1: Connection refused")
        with machine_lock():
            self.subnet = self._free_subnet()
            c.run(["ip", "link", "add", self.bridge, "type", "bridge"])
            c.run(["ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge])
            c.run(["ip", "link", "set", self.bridge, "up"])
        for old in (self.key, Path(f"{self.key}.pub")):
            old.unlink(missing_ok=True)
        c.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.prefix} controller", "-f",
               str(self.key)])
        (self.dir / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        known = []
        for i, h in enumerate(self.hosts.values()):
            ns = self.ns(h.name)
            h.address = f"{self.subnet}.{10 + i}"
            c.run(["ip", "netns", "add", ns])
            c.run(["ip", "-n", ns, "link", "set", "lo", "up"])
            root_end = f"{self.prefix}m{i}"
            c.run(["ip", "link", "add", root_end, "type", "veth", "peer", "name", "mgmt0", "netns", ns])
            c.run(["ip", "link", "set", root_end, "master", self.bridge, "up"])
            c.run(["ip", "-n", ns, "addr", "add", f"{h.address}/24", "dev", "mgmt0"])
            c.run(["ip", "-n", ns, "link", "set", "mgmt0", "up"])
            known.append(f"{h.address} {self._start_sshd(h)}")
        self.known_hosts.write_text("".join(k + "\n" for k in known))
        for sw in self.switches:
            ns = self.ns(sw)
            c.run(["ip", "netns", "add", ns])
            c.run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
            c.run(["ip", "-n", ns, "link", "set", "br0", "up"])
        for a, da, b, db in self.cables:
            c.run(["ip", "-n", self.ns(a), "link", "add", da, "type", "veth", "peer", "name", db, "netns",
                   self.ns(b)])
            for host, dev in ((a, da), (b, db)):
                if host in self.switches:
                    c.run(["ip", "-n", self.ns(host), "link", "set", dev, "master", "br0"])
                # a lab NIC is up before ccrig touches it; the hosts testbed only adds addresses and tc
                c.run(["ip", "-n", self.ns(host), "link", "set", dev, "up"])
        for h in self.hosts.values():
            self._wait_listening(h)
        self.write_inventory()

    def _free_subnet(self) -> str:
        used = self.c.run(["ip", "-4", "route", "show", "table", "all"]).stdout
        for k in range(200, 250):
            if f"198.19.{k}." not in used:
                return f"198.19.{k}"
        raise RuntimeError("no free 198.19.200-249.0/24 subnet for the management network")

    def _start_sshd(self, h: Host) -> str:
        d = self.dir / h.name
        d.mkdir(exist_ok=True)
        hostkey = d / "ssh_host_ed25519_key"
        for old in (hostkey, Path(f"{hostkey}.pub")):
            old.unlink(missing_ok=True)
        self.c.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.name, "-f", str(hostkey)])
        config = d / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {h.address}:22",
            f"HostKey {hostkey}",
            f"PidFile {d / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # the keys live under /tmp (world-writable parent), which StrictModes would refuse
            "StrictModes no",
            # Ansible and the hosts testbed multiplex many sessions over one connection
            "MaxSessions 64",
            "MaxStartups 64",
            f"Subsystem sftp {SFTP_SERVER}",
            "",
        ]))
        log = open(d / "sshd.log", "w")
        self.sshd[h.name] = self.c.popen([SSHD, "-D", "-e", "-f", str(config)], ns=self.ns(h.name),
                                         stdout=log, stderr=log)
        kind, key = Path(f"{hostkey}.pub").read_text().split()[:2]
        return f"{kind} {key}"

    def _wait_listening(self, h: Host, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((h.address, 22), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self.sshd[h.name].poll() is not None:
                    log = (self.dir / h.name / "sshd.log").read_text()
                    raise RuntimeError(f"sshd of {h.name} did not start: {log.strip()[-300:]}")
                time.sleep(0.1)

    def add_user(self, suffix: str) -> str:
        """A login user with the bed's key and no sudo rights (password '*': no password, yet not locked)."""
        name = self.user_name(suffix)
        home = self.dir / "home" / name
        home.parent.mkdir(mode=0o755, exist_ok=True)
        with machine_lock():
            self.c.run(["useradd", "--home-dir", str(home), "--create-home", "--shell", "/bin/sh", "--password", "*",
                        name])
        self.users.append(name)
        return name

    def _add_operator(self) -> None:
        self.add_user("op")
        rule = f"{self.operator} ALL=(ALL) NOPASSWD: ALL\n"
        staged = self.dir / "sudoers"
        staged.write_text(rule)
        self.c.run(["visudo", "-c", "-q", "-f", str(staged)])  # a broken sudoers file would break sudo
        self.sudoers.write_text(rule)
        self.sudoers.chmod(0o440)

    # --- inventory -----------------------------------------------------------------------------------
    def host_vars(self, h: Host) -> dict:
        v = {
            "ansible_host": h.address,
            "ansible_user": self.operator if h.user == "op" else h.user,
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes "
                                       f"-o IdentitiesOnly=yes -o ConnectTimeout=5",
            "ccrig_metrics_address": h.address,
        }
        if h.node:
            v["ccrig_node"] = h.node
        if h.interfaces:
            v["ccrig_interfaces"] = dict(h.interfaces)
        v.update(h.extra)
        return v

    def write_inventory(self, path: Path | None = None, **all_vars) -> Path:
        groups: dict[str, dict] = {}
        for h in self.hosts.values():
            for g in h.groups:
                groups.setdefault(g, {"hosts": {}})["hosts"][h.name] = self.host_vars(h)
        groups["controller"] = {"hosts": {"localhost": {"ansible_connection": "local",
                                                        "ansible_python_interpreter": "/usr/bin/python3",
                                                        **self.controller_vars}}}
        inv = {"all": {"vars": {"ansible_python_interpreter": "/usr/bin/python3", **all_vars},
                       "children": groups}}
        path = path or self.inventory
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    # --- use -----------------------------------------------------------------------------------------
    def exec(self, host: str, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Runs argv in a host's namespace directly (not over SSH): the test's independent view."""
        return self.c.run(argv, ns=self.ns(host), check=check)

    def state(self) -> dict:
        """What a run may change on the hosts, seen inside their namespaces (not over SSH): per host the
        experiment addresses, the qdisc kinds, forwarding, and each lab interface's MTU, GSO sizes and
        offloads."""
        out = {}
        for h in self.hosts:
            addrs = self.exec(h, ["ip", "-br", "addr"]).stdout
            qdiscs = json.loads(self.exec(h, ["tc", "-j", "qdisc", "show"]).stdout)
            links = {}
            for link in json.loads(self.exec(h, ["ip", "-d", "-j", "link", "show"]).stdout):
                if link["ifname"].startswith("lab"):
                    offloads = self.exec(h, ["ethtool", "-k", link["ifname"]]).stdout
                    links[link["ifname"]] = (link["mtu"], link.get("gso_max_segs"), link.get("gso_max_size"),
                                             re.findall(r"^(?:tcp-segmentation|generic-\w+)-offload: \w+",
                                                        offloads, re.M))
            out[h] = {"addresses": sorted(re.findall(r"198\.18\.\S+", addrs)),
                      "qdiscs": sorted({q["kind"] for q in qdiscs} - {"noqueue"}),
                      "forwarding": self.exec(h, ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip(),
                      "links": links}
        return out

    def report(self) -> str:
        """For a failing test's message: each host's sshd (running, or how it ended), its namespace's addresses
        and the last lines of its log. A refused connection says whether sshd died or the address went."""
        out = []
        for name, p in self.sshd.items():
            rc = p.poll()
            addrs = self.c.run(["ip", "-n", self.ns(name), "-br", "-4", "addr"], check=False)
            log = self.dir / name / "sshd.log"
            out.append(f"{name} ({self.hosts[name].address}): sshd {'running' if rc is None else f'exited {rc}'}; "
                       f"addresses {addrs.stdout.split() or addrs.stderr.strip()}; log: "
                       f"{log.read_text()[-500:] if log.exists() else 'none'}")
        return "\n".join(out)

    # --- down ----------------------------------------------------------------------------------------
    def down(self) -> None:
        for p in self.sshd.values():
            if p.poll() is None:
                p.terminate()
        for h in list(self.hosts) + self.switches:
            remove_namespace(self.ns(h), self.c)
        for p in self.sshd.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        self.c.ok(["ip", "link", "del", self.bridge])
        self.sudoers.unlink(missing_ok=True)
        with machine_lock():
            for u in self.users:
                self.c.ok(["userdel", "--remove", u])
        self.users.clear()
        self.c.ok(["rm", "-rf", "--one-file-system", str(self.dir)])

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


def dumbbell_bed(pairs: int = 2, prefix: str | None = None) -> SshHosts:
    """The dumbbell's hosts cabled like a lab: senders -> router host r1 -> router host r2 -> receivers.
    Interfaces are named lab0, lab1, ... (not the topology's eth0 ...), so the inventory's mapping is used."""
    hosts = [Host("r1", ["routers"], node="r1", interfaces={"r2": "lab0"}),
             Host("r2", ["routers"], node="r2", interfaces={"r1": "lab0"})]
    cables = [("r1", "lab0", "r2", "lab0")]
    for i in range(1, pairs + 1):
        hosts.append(Host(f"s{i}", ["senders"], node=f"s{i}", interfaces={"r1": "lab0"}))
        hosts.append(Host(f"d{i}", ["receivers"], node=f"d{i}", interfaces={"r2": "lab0"}))
        hosts[0].interfaces[f"s{i}"] = f"lab{i}"
        hosts[1].interfaces[f"d{i}"] = f"lab{i}"
        cables.append((f"s{i}", "lab0", "r1", f"lab{i}"))
        cables.append(("r2", f"lab{i}", f"d{i}", "lab0"))
    return SshHosts(hosts, cables, prefix=prefix)


def switch_bed(pairs: int = 1, prefix: str | None = None) -> SshHosts:
    """Senders and receivers on one (emulated hardware) switch `sw`; the topology's routers are the switch."""
    hosts, cables = [], []
    for i in range(1, pairs + 1):
        for role, name in (("senders", f"s{i}"), ("receivers", f"d{i}")):
            hosts.append(Host(name, [role], node=name, extra={"ccrig_interface": "lab0"}))
            cables.append((name, "lab0", "sw", f"p{name}"))
    return SshHosts(hosts, cables, switches=["sw"], prefix=prefix)


def pause_chain_spec(mode: str) -> dict:
    """A short pause_chain spec on the hosts testbed (rates x10 as in the study), PAUSE in the given mode."""
    return {"name": "hostspause", "testbed": "hosts",
            "topology": {"name": "pause_chain", "scale": 10, "link_a": {"rate": "60pps"},
                         "link_b": {"rate": "100pps", "buffer": "10pkt"},
                         "link_c": {"rate": "15pps", "buffer": "20pkt"},
                         "pause": {"mode": mode, "high": 15, "low": 12}},
            "flows": [{"cc": "reno"}], "duration": "3s", "interval": "1s", "warmup": 1}
