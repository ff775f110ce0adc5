"""The congestion-control manager's parts that need no kernel: generated names per host, the remote system's file
plumbing (over a connection that runs its argv with a real shell here), the per-system set, ccrig clean's names,
and the BPF templates built again when a source moved on (make and clang on a copy of tcp_modules)."""
import base64
import gzip
import os
import re
import shutil
import subprocess

import pytest

from ccrig.commands import Commands
from ccrig.topologies.testbeds.hosts.clean import SSH_DIR, run_named as _is_run
from ccrig.tcp_modules import bpfobj, laws
from ccrig.tcp_modules.bpf import NAME_RE, generated_name, prefix_tag
from ccrig.tcp_modules.manager import CcSet, build
from ccrig.tcp_modules.systems import HERE, LocalSystem, RemoteSystem, System


class ShellConnection:
    """What RemoteSystem needs of an SSH host's Node: run(argv, check, timeout, input) and put(path, data, mode),
    here with a real shell, a file travelling as text on the command's stdin (gzip + base64) as it would to a
    host."""

    def __init__(self):
        self.argvs = []

    def run(self, argv, check=True, timeout=60, input=None):
        self.argvs.append(argv)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input, check=check)

    def put(self, path, data, mode=0o644):
        raw = data.encode() if isinstance(data, str) else data
        self.run(["sh", "-c", 'base64 -d | gzip -dc > "$1" && chmod "$2" "$1"', "put", path, f"{mode:o}"],
                 input=base64.b64encode(gzip.compress(raw, mtime=0)).decode() + "\n")


LAW = laws.AlphaBeta(1.5, 0.6)


def test_names_differ_per_host_and_keep_the_run_prefix_tag():
    here, s1, s2 = (generated_name("ccrig-42", LAW, h) for h in ("", "s1", "s2"))
    assert len({here, s1, s2}) == 3
    for name in (here, s1, s2):
        m = NAME_RE.match(name)
        assert m and m.group(2) == prefix_tag("ccrig-42") and len(name) <= 15
    # one host, one prefix, one parameterisation: one name (a run that died is replaced, not duplicated)
    assert generated_name("ccrig-42", LAW, "s1") == s1
    # this machine's names are what they always were
    assert here == generated_name("ccrig-42", LAW)


def test_remote_system_moves_binary_files_as_text(tmp_path):
    conn = ShellConnection()
    s = RemoteSystem(conn, "h1", tmp_path / "kmod")
    data = bytes(range(256)) * 40 + b"\0\0\n\r"
    path = tmp_path / "deep" / "dir" / "obj.bpf.o"
    s.write(path, data)
    assert path.read_bytes() == data
    # only text crossed the connection (the command's stdin), and it is smaller than the object
    assert all(isinstance(w, str) for argv in conn.argvs for w in argv)
    assert s.exists(path) and not s.exists(tmp_path / "nope")
    assert s.sha256(path) == bpfobj.sha256(data)
    assert s.listdir(path.parent) == ["obj.bpf.o"] and s.listdir(tmp_path / "nope") == []
    (tmp_path / "t.txt").write_text("reno cubic\n")
    assert s.read(tmp_path / "t.txt") == "reno cubic\n" and s.read(tmp_path / "nope") is None
    s.remove(path, tmp_path / "nope")
    assert not path.exists()
    assert s.which("sh") and not s.which("no-such-tool-h1cc")
    assert s.release() == LocalSystem().release()
    assert s.kmod_dir == tmp_path / "kmod" and s.where == "host h1" and not s.local


def test_remote_system_of_an_inventory_host_uses_the_roles_module_dir():
    from ccrig.topologies.testbeds.hosts import InventoryHost
    h = InventoryHost(name="s1", address="192.0.2.1")
    assert str(RemoteSystem.of(h, None).kmod_dir) == "/opt/ccrig/tcp_modules/kmod"
    h.vars["tcp_modules_dir"] = "/srv/laws"
    assert str(RemoteSystem.of(h, None).kmod_dir) == "/srv/laws/kmod"


class Offers(System):
    """A system whose kernel offers some names and nothing else (for the planning code alone)."""

    def __init__(self, name, offers):
        self.name, self.where, self.local, self.offers = name, f"host {name}", False, offers

    def read(self, path):
        return " ".join(self.offers) + "\n"

    def exists(self, path):
        return False

    def release(self):
        return "6.1.0-test"

    def which(self, tool):
        return False

    def is_root(self):
        return True


def test_cc_set_checks_every_host_before_loading_and_names_the_host():
    cs = CcSet(None, "ccrig-42", "auto", {"s1": Offers("s1", ["reno", "cubic"]), "s2": Offers("s2", ["reno"])})
    with pytest.raises(Exception) as e:
        cs.prepare({"s1": ["cubic"], "s2": ["cubic"]})
    msg = str(e.value)
    assert "host s2: cc 'cubic': kernel 6.1.0-test does not offer it" in msg and "host s1" not in msg
    cs = CcSet(None, "ccrig-42", "auto", {"s1": Offers("s1", ["reno", "cubic"]), "s2": Offers("s2", ["cubic"])})
    assert cs.prepare({"s1": ["cubic", "reno"], "s2": ["cubic"]}) == {"s1": {"cubic": "cubic", "reno": "reno"},
                                                                      "s2": {"cubic": "cubic"}}
    assert cs.kernel_name("s2", "cubic") == "cubic"
    d = cs.describe()
    assert set(d) == {"s1", "s2"} and d["s1"]["node"] == "s1" and d["s1"]["kernel"] == "6.1.0-test"
    assert [x["kernel_name"] for x in d["s1"]["loaded"]] == ["cubic", "reno"]
    assert cs.release() == []


def test_clean_recognises_ssh_control_dirs_and_run_names():
    for name, run in (("ccrig-123-ssh-abcd_e12", "ccrig-123"), ("h1cc9a-ssh-cc-k2j4h5g6", "h1cc9a")):
        assert SSH_DIR.match(name).group("run") == run
    assert SSH_DIR.match("ccrig-123-bed") is None
    assert _is_run("ccrig-123-s1") and not _is_run("ccrig-provision-ssh-abcdefgh") and not _is_run("ccrig-x-s1")
    assert re.fullmatch(SSH_DIR, "ccrig-provision-ssh-abcdefgh")   # recognised, and spared by _is_run


def test_a_template_older_than_its_sources_is_built_again(tmp_path):
    """A checkout moved on since its BPF templates were built (the glue's repair came that way) runs its own glue:
    register() asks build("bpf"), which builds what make finds missing or older than its sources and else only
    asks (`make -q`). On a copy of tcp_modules, one family's object as the target."""
    folder = tmp_path / "tcp_modules"
    shutil.copytree(HERE, folder, ignore=shutil.ignore_patterns("build", "kmod", "__pycache__"))
    commands, target = Commands(tmp_path / "commands.log"), folder / "build" / bpfobj.OBJECT["alphabeta"]
    assert build(commands, str(target), folder) and target.exists()     # missing: built
    built = target.stat().st_mtime_ns
    assert not build(commands, str(target), folder)                     # up to date: only asked
    assert target.stat().st_mtime_ns == built
    glue = folder / "bpf" / "ccrig_tcp.bpf.h"
    os.utime(glue, ns=(built + 10**9, built + 10**9))                   # a source moved on
    assert build(commands, str(target), folder) and target.stat().st_mtime_ns > built
