"""Congestion-control laws on the hosts testbed, over real SSH (tests/support/sshhosts.py: namespaces with their own
sshd as the hosts, all sharing this machine's kernel).

A run's BPF variants are registered on each sender's host through its SSH connection, under a name of that
host's own (the bed's hosts share one kernel, so two hosts registering one name would collide), and removed on
success, on Ctrl-C, and by `ccrig clean -i INVENTORY --prefix P` after a SIGKILL. Each check looks from the
hosts' own side too (their namespaces directly, not over SSH), so a run that only believes it did something fails.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ccrig.commands import Commands
from ccrig.errors import InputError
from ccrig.experiments.workloads.base import CLIENT_PORT
from ccrig.tcp_modules import bpfobj, laws, manager
from ccrig.tcp_modules.manager import generated_name, struct_ops_maps
from ccrig.topologies import testbeds
from ccrig.topologies.testbeds.netns import pids_in

from support.interrupt import default_sigint
from support.sshhosts import dumbbell_bed

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")

ROOT = Path(__file__).resolve().parents[2]
CCRIG = [sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()"]
LAW = {"law": "alphabeta", "alpha": 1.5, "beta": 0.6}   # no preset: a variant of its own
SENDERS = ("s1", "s2")
HOSTS = ("s1", "s2", "d1", "d2", "r1", "r2")
# `ccrig run` with the run's name prefix chosen (the command line always takes ccrig-<pid>): every name the run
# makes then carries this test's prefix
DRIVER = """
import sys
from pathlib import Path
from ccrig.experiments import spec as specmod
from ccrig.experiments.run.runner import Options, Runner
path = Path(sys.argv[1])
raw, exp = specmod.load(path)
Runner(path, raw, exp, Options(out_root=Path(sys.argv[2]), prometheus="off", prefix=sys.argv[3],
                               progress=False)).run()
"""


@pytest.fixture(scope="module")
def bed():
    with dumbbell_bed(pairs=2) as b:
        yield b


def spec(duration: str) -> dict:
    return {"name": "hostscc", "testbed": "hosts", "cc_form": "bpf",
            "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt", "qdisc": "pfifo"}},
            "flows": [{"count": 2, "cc": LAW}], "duration": duration, "interval": "1s", "warmup": 1}


def names(prefix: str) -> dict[str, str]:
    """The kernel name each sender host's variant must have."""
    law = laws.AlphaBeta(LAW["alpha"], LAW["beta"])
    return {h: generated_name(prefix, law, h) for h in SENDERS}


def start(bed, tmp_path, prefix: str, duration: str) -> subprocess.Popen:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec(duration)))
    env = {**os.environ, "CCRIG_INVENTORY": str(bed.inventory)}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(path), str(tmp_path / "runs"), prefix], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)


def run_dir(tmp_path) -> Path:
    return next((tmp_path / "runs").glob("*"))


def wait_for_traffic(tmp_path, proc, timeout=120) -> None:
    """Until the run has measured its first interval (its flows are going)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        rows = list((tmp_path / "runs").glob("*/points/000/rep0/intervals.csv"))
        if rows and len(rows[0].read_text().splitlines()) >= 3:
            return
        time.sleep(0.2)
    raise AssertionError("the run measured no interval")


def available(bed) -> list[str]:
    return bed.exec("s1", ["cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"]).stdout.split()


def registered(prefix: str) -> list[str]:
    """BPF congestion controls registered under prefix's tag (the bed's hosts share this kernel)."""
    tag = manager.prefix_tag(prefix)
    return [n for _, n in struct_ops_maps(Commands(None)) if (m := manager.NAME_RE.match(n)) and m.group(2) == tag]


def stray_processes(bed) -> list[str]:
    """Processes in the hosts' namespaces other than their sshd (which the bed runs)."""
    out = []
    for ns, pids in pids_in([bed.ns(h) for h in HOSTS]).items():
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if cmd and not cmd.startswith(("/usr/sbin/sshd", "sshd")):
                out.append(f"{ns}: {pid} {cmd}")
    return out


def network_left(bed) -> list[str]:
    out = []
    for h in HOSTS:
        addrs = bed.exec(h, ["ip", "-br", "addr"]).stdout
        if "198.18." in addrs:
            out.append(f"{h}: {addrs.strip()}")
        for q in json.loads(bed.exec(h, ["tc", "-j", "qdisc", "show"]).stdout):
            if q.get("root") and q.get("handle") != "0:":
                out.append(f"{h}: qdisc {q['kind']} on {q.get('dev')}")
    return out


def left_behind(bed, prefix: str) -> list[str]:
    return ([f"BPF {n}" for n in registered(prefix)] + stray_processes(bed) + network_left(bed)
            + [f"dir {d}" for d in Path("/tmp").glob(f"{prefix}-*")]
            + [f"record {r}" for r in manager.STATE_DIR.glob(f"cr?_{manager.prefix_tag(prefix)}_*")])


def settled_left_behind(bed, prefix: str, timeout: float = 15) -> list[str]:
    """left_behind once it is empty, or what is still there after timeout seconds: the hosts' sshd close the
    sessions of processes that just ended a moment later, and a busy machine's moment is longer."""
    deadline = time.monotonic() + timeout
    while (left := left_behind(bed, prefix)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def safety_net(prefix: str) -> None:
    """After the assertions: whatever a failing test left in the shared kernel goes (the bed takes the rest)."""
    manager.cleanup(Commands(None), prefix)


def test_bpf_law_is_registered_on_each_sender_host_over_ssh_and_removed(bed, tmp_path):
    prefix = f"{bed.prefix}a"
    want = names(prefix)
    assert want["s1"] != want["s2"]
    seen: dict[str, set] = {h: set() for h in SENDERS}
    done = threading.Event()

    def watch():
        # each sender's data socket as its own host's kernel reports it (ss: INET_DIAG, TCP_INFO and the cc)
        while not done.is_set():
            for i, h in enumerate(SENDERS):
                out = bed.exec(h, ["ss", "-Htin", "state", "established", f"( sport = :{CLIENT_PORT + i} )"],
                               check=False).stdout
                seen[h] |= {w for w in out.split() if manager.NAME_RE.match(w)}
            time.sleep(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    proc = start(bed, tmp_path, prefix, "4s")
    watcher.start()
    try:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    finally:
        done.set()
        watcher.join(10)
        safety_net(prefix)
    run = run_dir(tmp_path)
    # registered through each sender's SSH connection, from an object shipped there
    # (commands.log: "TIME STATUS ARGV" lines, and the here-documents of commands fed on stdin)
    ssh = [line for line in (run / "commands.log").read_text().splitlines() if line.split()[2:3] == ["ssh"]]
    for h in SENDERS:
        on_host = [line for line in ssh if f" {bed.hosts[h].address} -- " in line]
        assert any(f"bpftool struct_ops register /run/ccrig/cc/{want[h]}.bpf.o" in line for line in on_host)
        assert any("bpftool struct_ops unregister" in line for line in on_host)
    # each flow's socket used its sender host's name: seen by the host's kernel, by iperf3 and in the summary
    assert seen == {h: {want[h]} for h in SENDERS}, seen
    summary = json.loads((run / "summary.json").read_text())
    flows = summary["points"][0]["flows"]
    assert [f["kernel_cc"] for f in flows] == [want["s1"], want["s2"]]
    assert [f["sender"] for f in flows] == list(SENDERS)
    for i, h in enumerate(SENDERS):
        iperf = json.loads((run / "points" / "000" / "rep0" / f"iperf3-{i}.json").read_text())
        assert iperf["end"]["sender_tcp_congestion"] == want[h]
        assert flows[i]["goodput_bps"]["mean"] > 0.5e6
    # env.json: per host what was loaded, its parameters and the sha256 of the object shipped
    env = json.loads((run / "env.json").read_text())["congestion_controls"]
    assert set(env) == set(SENDERS), env
    template = manager.BUILD / bpfobj.OBJECT["alphabeta"]
    for h in SENDERS:
        assert env[h]["node"] == h and env[h]["kernel"] == os.uname().release
        (item,) = env[h]["loaded"]
        assert item["form"] == "bpf" and item["kernel_name"] == want[h]
        assert item["parameters"] == {"law": "alphabeta", "alpha": 1.5, "beta": 0.6}
        law = laws.AlphaBeta(1.5, 0.6)
        assert item["sha256"] == bpfobj.sha256(bpfobj.variant(template, law, want[h]))
    # and nothing is left: not the names, not the records, not the connections, read until it is gone as the
    # other tests here do (sessions that close late on a busy machine). A leftover that stays still fails: CI on
    # 9ad58fa found r2's run folder (undo.sh alone in it) still there 20 min later, a teardown leak not yet found:
    # the teardown now retries the folder's rm and warns on stderr if it stays, so a failure shows both
    assert not set(want.values()) & set(available(bed))
    rms = [line for line in (run / "commands.log").read_text().splitlines() if "rm -rf" in line]
    assert (left := settled_left_behind(bed, prefix)) == [], (left, rms, err[-2000:])
    assert not subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout


def test_interrupted_hosts_run_leaves_nothing(bed, tmp_path):
    prefix = f"{bed.prefix}i"
    proc = start(bed, tmp_path, prefix, "10s")
    try:
        wait_for_traffic(tmp_path, proc)
        # mid-run: the variants are registered on the senders' hosts
        assert set(names(prefix).values()) <= set(available(bed))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        safety_net(prefix)
    assert settled_left_behind(bed, prefix) == []
    assert not set(names(prefix).values()) & set(available(bed))
    assert not subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout


def test_a_run_folder_that_will_not_go_is_said_with_the_way_out(bed, tmp_path):
    """A host's run folder the teardown cannot remove (here a file in r2's made immutable mid-run: root's rm fails
    as on a host's full or read-only /tmp) is named on stderr with `ccrig clean -i`, which then removes it; the run
    itself succeeds (down() never raises). CI once found r2's folder left without a word."""
    prefix = f"{bed.prefix}f"
    stuck = Path(f"/tmp/{prefix}-r2/stuck")
    proc = start(bed, tmp_path, prefix, "4s")
    try:
        wait_for_traffic(tmp_path, proc)
        stuck.write_text("")
        subprocess.run(["chattr", "+i", str(stuck)], check=True)
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        assert stuck.exists()
        # once per time the testbed went down: a repetition the BPF fault spoiled ran again (summary's reruns) on
        # a testbed of its own, which met the same folder (CI on this kernel: two warnings, one rerun)
        summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
        downs = 1 + len(summary.get("reruns", []))
        said = [line for line in err.splitlines() if line.startswith("warning: hosts testbed: ")]
        assert len(said) == downs, (downs, err[-3000:])
        for line in said:
            assert f"its run folder /tmp/{prefix}-r2 stays (" in line, err[-3000:]
            assert f"`ccrig clean -i INVENTORY --prefix {prefix}` removes it" in line, said
        # the way out it names
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
        clean = subprocess.run([*CCRIG, "clean", "-i", str(bed.inventory), "--prefix", prefix], cwd=ROOT,
                               capture_output=True, text=True, timeout=180)
        assert clean.returncode == 0, clean.stderr
        assert f"removed /tmp/{prefix}-r2 on host r2" in clean.stdout, clean.stdout
        assert settled_left_behind(bed, prefix) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["chattr", "-i", str(stuck)], capture_output=True)
        safety_net(prefix)
        subprocess.run(["rm", "-rf", str(stuck.parent)], capture_output=True)


def test_clean_with_inventory_removes_what_a_killed_run_left_on_the_hosts(bed, tmp_path):
    prefix = f"{bed.prefix}k"
    want = names(prefix)
    before = bed.state()
    proc = start(bed, tmp_path, prefix, "10s")
    planted = None
    try:
        wait_for_traffic(tmp_path, proc)
        proc.kill()
        proc.communicate(timeout=30)
        # what a SIGKILLed run leaves: its variants, its hosts' addresses and qdiscs, its run directories, its
        # SSH masters here; and a process that outlived its run (started as the runner's wrapper would)
        assert set(want.values()) <= set(available(bed))
        assert any("198.18." in line for line in network_left(bed))
        settings = lambda state: {h: (x["links"], x["forwarding"]) for h, x in state.items()}  # noqa: E731
        assert settings(bed.state()) != settings(before)   # MTU/offloads/forwarding as the run set them
        rdir = Path(f"/tmp/{prefix}-d1")
        assert rdir.is_dir()
        bed.exec("d1", ["sh", "-c", 'sleep 333.25 </dev/null >/dev/null 2>&1 & echo $! > "$1"', "plant",
                        str(rdir / "p999.pid")])
        planted = int((rdir / "p999.pid").read_text())
        assert subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout
        # (the README's form of one run's prefix: ccrig-PID-, with its dash)
        out = subprocess.run([*CCRIG, "clean", "-i", str(bed.inventory), "--prefix", f"{prefix}-"], cwd=ROOT,
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        said = out.stdout
        for name in want.values():
            assert f"unregistered BPF congestion control {name} on host " in said, said
        assert f"stopped process {planted} (sleep 333.25) on host d1" in said, said
        assert f"removed /tmp/{prefix}-d1 on host d1" in said and f"removed /tmp/{prefix}-s1 on host s1" in said
        # each host's undo.sh, written before the run changed anything there, put it back (addresses, routes,
        # qdiscs, MTU, offloads, forwarding): nothing was left for the generic sweep of 198.18.x addresses
        for h in ("s1", "r1", "d1"):
            assert re.search(rf"ran /tmp/{prefix}-{h}/undo.sh on host {h}: \d+ commands restoring", said), said
        assert "removed address" not in said and "removed the root qdisc" not in said, said
        assert "closed the SSH connection to host s1" in said, said
        assert settled_left_behind(bed, prefix) == []
        assert bed.state() == before
        assert not subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout
        # a second clean finds nothing of that run
        again = subprocess.run([*CCRIG, "clean", "-i", str(bed.inventory), "--prefix", prefix], cwd=ROOT,
                               capture_output=True, text=True, timeout=180)
        assert again.returncode == 0, again.stderr
        assert not [line for line in again.stdout.splitlines() if prefix in line or "host" in line], again.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        if planted is not None:
            subprocess.run(["kill", "-KILL", str(planted)], capture_output=True)
        safety_net(prefix)


def test_clean_with_a_missing_inventory_says_so():
    out = subprocess.run([*CCRIG, "clean", "-i", "/no/such/inventory.yml", "--prefix", "h1ccnone"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--inventory: got '/no/such/inventory.yml'" in out.stderr, out.stderr


def test_law_systems_are_the_senders_hosts_for_the_with_block(bed, monkeypatch):
    """The hosts testbed's law_systems hook (where a run loads its laws): each sender node's host as a System
    over a connection of its own, open for the with block and closed after it; a node no host plays is named
    before anything is connected."""
    monkeypatch.setenv("CCRIG_INVENTORY", str(bed.inventory))
    prefix = f"{bed.prefix}ls"
    hosts = testbeds.get("hosts")
    with hosts.law_systems(list(SENDERS), Commands(None), prefix) as systems:
        assert set(systems) == set(SENDERS)
        seen = set()
        for node, system in systems.items():
            assert system.where == f"host {node}" and not system.local
            # the host's own view of its interfaces (its namespace, directly) is what the System sees over SSH
            over_ssh = system.run(["ip", "-br", "addr"]).stdout
            assert over_ssh == bed.exec(node, ["ip", "-br", "addr"]).stdout
            seen.add(over_ssh)
        assert len(seen) == len(SENDERS)
        assert list(Path("/tmp").glob(f"{prefix}-ssh-cc-*"))
        assert subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout
    assert not list(Path("/tmp").glob(f"{prefix}-ssh-cc-*"))
    assert not subprocess.run(["pgrep", "-f", f"ControlPath=/tmp/{prefix}-ssh"], capture_output=True).stdout
    with pytest.raises(InputError, match=r"^hosts testbed: node x9: no inventory host plays it"):
        with hosts.law_systems(["s1", "x9"], Commands(None), prefix):
            pass
    assert not list(Path("/tmp").glob(f"{prefix}-*"))
