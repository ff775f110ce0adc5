"""The hosts testbed over real SSH: namespaces with their own sshd as the hosts (tests/support/sshhosts.py).

Everything is checked from two sides: through the testbed (over SSH) and directly in the hosts' namespaces
(the bed's own view), so a testbed that only believes it did something fails.
"""
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from ccrig.analysis import pcap
from ccrig.commands import Commands
from ccrig.experiments.run.capture import Capture, CaptureSpec
from ccrig.errors import InputError, RunError
from ccrig.topologies.named.dumbbell import DumbbellSpec
from ccrig.topologies.testbeds.hosts import HostsTestbed

import reproduce
from conftest import CCRIG, ROOT
from support.sshhosts import dumbbell_bed, switch_bed

# SSH test beds add users and sudoers files: useradd refuses while another holds /etc/passwd's lock
pytestmark = pytest.mark.xdist_group("sshhosts")

SAMPLER = Path(__file__).resolve().parents[2] / "experiments" / "nodes" / "sampler.py"


def topology(pairs=1, rate="10mbit", **extra):
    return DumbbellSpec.model_validate({"bottleneck": {"rate": rate, "buffer": "50pkt"}, **extra}).build(pairs)


@pytest.fixture(scope="module")
def bed():
    with dumbbell_bed(pairs=1) as b:
        yield b


def pids_matching(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def iperf3(tb, sender, receiver, seconds=3, port=5301):
    srv = tb.popen(receiver, ["iperf3", "--server", "--one-off", "--bind", tb.address(receiver), "--port", str(port)])
    deadline = time.monotonic() + 10
    while not tb.run(receiver, ["ss", "-Hltn", f"sport = :{port}"]).stdout.strip():
        assert time.monotonic() < deadline, "iperf3 server did not listen"
        time.sleep(0.1)
    cli = tb.popen(sender, ["iperf3", "--client", tb.address(receiver), "--port", str(port), "--time", str(seconds),
                            "--json"], stdout=subprocess.PIPE)
    out, _ = cli.communicate(timeout=seconds + 30)
    srv.wait(10)
    return json.loads(out)


def test_router_mode_realises_the_dumbbell_and_restores_every_host(bed, tmp_path):
    log = tmp_path / "commands.log"
    tb = HostsTestbed(topology(), Commands(log), f"{bed.prefix}t", inventory=bed.inventory)
    assert tb.preflight() == []
    fwd_before = bed.exec("r1", ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip()
    link_before = json.loads(bed.exec("s1", ["ip", "-d", "-j", "link", "show", "lab0"]).stdout)[0]
    tb.up()
    try:
        # the topology's addresses on the inventory's interfaces (not on eth0...), seen from inside the host
        assert "198.18.0.1/24" in bed.exec("r1", ["ip", "-br", "addr", "show", "lab0"]).stdout
        assert "198.18.1.1/24" in bed.exec("s1", ["ip", "-br", "addr", "show", "lab0"]).stdout
        assert tb.address("d1") == "198.18.2.2"
        # the bottleneck on the router host's egress toward r2
        assert tb.egress_device("r1", "r2") == "lab0"
        qd = json.loads(bed.exec("r1", ["tc", "-j", "qdisc", "show", "dev", "lab0"]).stdout)
        assert {q["kind"] for q in qd} >= {"htb", "pfifo"}
        assert bed.exec("r1", ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip() == "1"
        link = json.loads(bed.exec("s1", ["ip", "-d", "-j", "link", "show", "lab0"]).stdout)[0]
        assert link["gso_max_segs"] == 1
        # commands over SSH as root (through sudo: the bed logs in as an unprivileged operator)
        assert tb.run("s1", ["id", "-u"]).stdout.strip() == "0"
        assert "0% packet loss" in tb.run("s1", ["ping", "-c", "2", "-i", "0.2", tb.address("d1")]).stdout
        with pytest.raises(RunError, match="failed"):
            tb.run("s1", ["false"])
        # every command went through the run's log
        assert "ssh " in log.read_text() and "ControlPath=" in log.read_text()
        # clock offsets: the hosts share this machine's clock, so each offset is within its own error bound
        assert set(tb.clock) == {"s1", "d1", "r1", "r2"}
        for node, c in tb.clock.items():
            assert abs(c["offset_s"]) <= c["uncertainty_s"] + 0.005, (node, c)
        assert tb.describe()["nodes"]["r1"]["interfaces"] == {"r2": "lab0", "s1": "lab1"}
        # traffic across the hosts is shaped by the router host's htb; a capture on d1's host streams back here
        cap = Capture(tb, CaptureSpec(links=["d1-r2"], max_mb=50), tb.topology, tmp_path / "capture")
        cap.start()
        res = iperf3(tb, "s1", "d1")
        got = cap.stop()
        bps = res["end"]["sum_received"]["bits_per_second"]
        assert 0.75 * 10e6 < bps < 1.02 * 10e6, bps
        assert got["links"][0]["dropped_by_capture"] == 0 and got["links"][0]["packets"] > 1000, got
        # the data connection's highest sequence number reached d1: at least the bytes iperf3's server read (the
        # capture lost none of them) and at most those its client wrote (nothing invented). Not "within 1 % of
        # the bytes read": what reached d1 but sat unread in its socket when the server stopped counting is the
        # server's lateness, 37685 bytes (1.05 %) on a host whose hypervisor took a fifth of the CPU.
        data = max(pcap.time_sequences(tmp_path / "capture" / "capture-d1-r2.pcap"), key=lambda t: len(t.data))
        received, sent = res["end"]["sum_received"]["bytes"], res["end"]["sum_sent"]["bytes"]
        highest = max(end for _, _, end in data.data)
        assert received - 0.01 * received <= highest <= sent + 0.01 * received, (received, highest, sent)
        # a project script named on a command line is staged to the host and runs there
        out = tb.run("s1", [*tb.python("s1"), str(SAMPLER), "--help"]).stdout
        assert "--period" in out
        # a background process stops when its local ssh is killed, as a local one would
        p = tb.popen("d1", ["sleep", "317.25"])
        deadline = time.monotonic() + 10
        while not pids_matching("^sleep 317.25"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(10)
        deadline = time.monotonic() + 10
        while pids_matching("^sleep 317.25"):
            assert time.monotonic() < deadline, "remote process outlived its ssh"
            time.sleep(0.1)
        # and one still running at down() is ended by down()
        tb.popen("d1", ["sleep", "318.25"])
        time.sleep(0.5)
        assert pids_matching("^sleep 318.25")
    finally:
        tb.down()
    assert not pids_matching("^sleep 318.25")
    assert "198.18." not in bed.exec("r1", ["ip", "-br", "addr"]).stdout
    assert "198.18." not in bed.exec("s1", ["ip", "route"]).stdout
    assert "htb" not in bed.exec("r1", ["tc", "qdisc", "show", "dev", "lab0"]).stdout
    assert bed.exec("r1", ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip() == fwd_before
    link = json.loads(bed.exec("s1", ["ip", "-d", "-j", "link", "show", "lab0"]).stdout)[0]
    assert link["gso_max_segs"] == link_before["gso_max_segs"]
    assert link["mtu"] == link_before["mtu"]
    assert not list(Path("/tmp").glob(f"{bed.prefix}t-*")), "staged files or control sockets left behind"
    assert not pids_matching(f"ControlPath=/tmp/{bed.prefix}t-ssh")
    tb.down()  # idempotent


def test_interrupted_run_restores_the_hosts(bed, tmp_path):
    tb = HostsTestbed(topology(), Commands(), f"{bed.prefix}i", inventory=bed.inventory)
    with pytest.raises(KeyboardInterrupt):
        with tb:
            tb.up()
            tb.popen("d1", ["sleep", "319.25"])
            tb.popen("s1", ["iperf3", "--server", "--port", "5302"])
            time.sleep(0.5)
            raise KeyboardInterrupt
    assert not pids_matching("^sleep 319.25")
    assert not bed.exec("s1", ["ss", "-Hltn", "sport = :5302"]).stdout.strip()
    assert "htb" not in bed.exec("r1", ["tc", "qdisc", "show", "dev", "lab0"]).stdout
    assert "198.18." not in bed.exec("d1", ["ip", "-br", "addr"]).stdout


def write_inventory(bed, tmp_path, change) -> Path:
    inv = yaml.safe_load(bed.inventory.read_text())
    change(inv["all"]["children"])
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_wrong_interface_unreachable_host_and_unmapped_node_are_named_before_anything(bed, tmp_path):
    def breaks(groups):
        groups["senders"]["hosts"]["s1"]["ccrig_interfaces"] = {"r1": "nosuch0"}
        groups["receivers"]["hosts"]["d1"]["ansible_host"] = f"{bed.subnet}.99"  # nothing listens there
        del groups["routers"]["hosts"]["r2"]
    inv = write_inventory(bed, tmp_path, breaks)
    tb = HostsTestbed(topology(), Commands(), f"{bed.prefix}w", inventory=inv)
    problems = tb.preflight()
    assert any("node r2" in p and "no inventory host" in p for p in problems), problems
    tb.down()
    # with every node mapped, the hosts themselves are checked
    inv = write_inventory(bed, tmp_path, lambda g: (
        g["senders"]["hosts"]["s1"].update(ccrig_interfaces={"r1": "nosuch0"}),
        g["receivers"]["hosts"]["d1"].update(ansible_host=f"{bed.subnet}.99")))
    tb = HostsTestbed(topology(), Commands(), f"{bed.prefix}w", inventory=inv)
    with pytest.raises(InputError) as e:
        tb.up()
    msg = str(e.value)
    assert "host s1" in msg and "'nosuch0' does not exist" in msg and "lab0" in msg
    assert "host d1" in msg and "unreachable" in msg
    # nothing was set up on the hosts that were reachable
    assert "198.18." not in bed.exec("r1", ["ip", "-br", "addr"]).stdout


def test_qdisc_missing_in_a_hosts_kernel_is_named_before_anything(bed, ccrig):
    """The hosts' kernels are probed over SSH in preflight (here they are this machine's 6.18, which has no
    red): the error names the discipline, the kernel, the host, and the way out; nothing is set up."""
    spec = {"name": "hostsred", "testbed": "hosts", "flows": [{"cc": "reno"}], "duration": "4s",
            "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit", "buffer": "50pkt", "qdisc": "red"}}}
    run = ccrig.run(spec, "--inventory", str(bed.inventory), timeout=120)
    err = run.stderr
    assert run.returncode == 2, (run.stdout, err)
    r1 = f"host r1 ({bed.operator}@{bed.hosts['r1'].address}:22)"
    assert f"queue discipline 'red' is not available in kernel {os.uname().release} on {r1}" in err, err
    assert "modprobe sch_red" in err
    # only the bottleneck's host transmits into red; the others were not blamed
    assert "on host s1" not in err and "on host d1" not in err
    assert not ccrig.run_dirs()
    assert "198.18." not in bed.exec("r1", ["ip", "-br", "addr"]).stdout
    # the probe's scratch namespace on r1 (ccrig-PID-pre-qprobe) is gone with it
    assert f"ccrig-{run.pid}-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    # ccrig preflight asks the same hosts the same questions, and says which host has what
    p = subprocess.run([*CCRIG, "preflight", str(ccrig.write(spec)), "--inventory", str(bed.inventory)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and f"'red' is not available in kernel {os.uname().release} on {r1}" in p.stderr
    row = next(line for line in p.stdout.splitlines() if "the red queue discipline on host r1" in line)
    assert "the r1->r2 link's qdisc" in row and " NO " in row, p.stdout


def test_host_without_sudo_is_refused(bed, tmp_path):
    user = bed.add_user("ns")
    inv = write_inventory(bed, tmp_path, lambda g: g["senders"]["hosts"]["s1"].update(ansible_user=user))
    tb = HostsTestbed(topology(), Commands(), f"{bed.prefix}n", inventory=inv)
    problems = tb.preflight()
    tb.down()
    assert len(problems) == 1 and "host s1" in problems[0] and f"user {user} cannot run commands as root" in \
        problems[0], problems


def test_missing_inventory():
    with pytest.raises(InputError, match="no/such/inventory.yml"):
        HostsTestbed(topology(), Commands(), "x", inventory=Path("/no/such/inventory.yml")).preflight()


def test_switch_mode_only_end_hosts_are_ours(tmp_path):
    with switch_bed(pairs=1) as bed:
        # the lab's switch is configured out of band: its port toward d1 is the bottleneck
        bed.exec("sw", ["tc", "qdisc", "add", "dev", "pd1", "root", "tbf", "rate", "10mbit", "burst", "20kb",
                        "latency", "50ms"])
        topo = topology()
        tb = HostsTestbed(topo, Commands(), f"{bed.prefix}s", inventory=bed.inventory, bottleneck="switch")
        with tb:
            tb.up()
            assert not tb.owned("r1") and tb.owned("s1")
            assert tb.address("s1") == "198.18.255.1" and tb.address("d1") == "198.18.255.2"
            assert "198.18.255.1/24" in bed.exec("s1", ["ip", "-br", "addr", "show", "lab0"]).stdout
            # no tc on the end hosts: the spec's bottleneck is the switch's, not applied by ccrig
            assert "htb" not in bed.exec("s1", ["tc", "qdisc", "show", "dev", "lab0"]).stdout
            assert tb.describe()["not_applied"]
            with pytest.raises(RunError, match="not a host of this testbed"):
                tb.run("r1", ["true"])
            bps = iperf3(tb, "s1", "d1")["end"]["sum_received"]["bits_per_second"]
            assert 0.7 * 10e6 < bps < 1.05 * 10e6, bps
        assert "198.18.255" not in bed.exec("s1", ["ip", "-br", "addr"]).stdout
        # delay on the switch's egress cannot be honoured, and says so before anything runs
        tb = HostsTestbed(topology(rtt="20ms"), Commands(), f"{bed.prefix}s", inventory=bed.inventory,
                          bottleneck="switch")
        problems = tb.preflight()
        assert any("delay/loss cannot be applied by a hardware switch" in p for p in problems), problems


def run_spec(tmp_path, raw: dict, name: str, prometheus_root: Path, prefix: str):
    from ccrig.experiments import spec as specmod
    from ccrig.experiments.run.runner import Options, Runner
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    raw, exp = specmod.load(path)
    opts = Options(out_root=tmp_path / name, prometheus_root=prometheus_root, prefix=prefix, progress=False)
    return Runner(path, raw, exp, opts).run()


def test_default_dumbbell_on_hosts_matches_netns(tmp_path, monkeypatch, prometheus):
    """The default spec run on `netns` and on `hosts` (one SSH host per node, veth cabling, all commands over
    SSH) gives the same result (tests/host/reproduce.py: system goodput within 10 % as it is, every flow within
    10 % when each is held to its own access link). The hosts run has the whole archive and its series in
    Prometheus."""
    raw = reproduce.default_spec()
    n = sum(f.get("count", 1) for f in raw["flows"])
    runs = {}
    with dumbbell_bed(pairs=n) as bed:
        monkeypatch.setenv("CCRIG_INVENTORY", str(bed.inventory))
        for testbed in ("netns", "hosts"):
            runs["default", testbed] = run_spec(tmp_path, {**raw, "testbed": testbed}, testbed, prometheus.root,
                                                f"{bed.prefix}{testbed[0]}")
    reproduce.check(runs["default", "netns"].path, runs["default", "hosts"].path, "hosts")
    result = runs["default", "hosts"]
    assert result.summary["testbed"] == "hosts"
    for point in ("000", "001"):
        rep = result.path / "points" / point / "rep0"
        for name in ("intervals.csv", "trace.csv", "qdisc.csv", "iperf3-0.json"):
            assert (rep / name).is_file() and (rep / name).stat().st_size > 0, (point, name)
    # the run's series reached Prometheus: one per flow, point and repetition
    assert result.prometheus_url
    q = urllib.request.quote(f'ccrig_flow_goodput_bytes_per_second{{run="{result.summary["run"]}"}}')
    with urllib.request.urlopen(f"{result.prometheus_url}/api/v1/query?query={q}", timeout=10) as r:
        assert len(json.loads(r.read())["data"]["result"]) == 2 * n * result.summary["repetitions"]
