"""The capability probe against the running kernel, checked by two independent witnesses: the kernel's own
build configuration, and a bare `tc qdisc add` of each kind; and preflight refusing a missing discipline."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import absent
from ccrig.commands import Commands, Local
from ccrig.errors import RunError
from ccrig import qdiscs
from ccrig.qdiscs import probe

pytestmark = pytest.mark.host

PREFIX = os.environ.get("CCRIG_TEST_PREFIX", "ccrig-t")
RELEASE = os.uname().release
ROOT = Path(__file__).resolve().parents[2]

# the Kconfig symbol that builds each discipline, as its module declares it, and the link disciplines'
CONFIG = {**{kind: cls.kconfig for kind, cls in qdiscs.available().items()},
          "htb": "NET_SCH_HTB", "tbf": "NET_SCH_TBF", "netem": "NET_SCH_NETEM"}


@pytest.fixture(scope="module")
def found():
    if os.geteuid() != 0:
        pytest.skip("needs root (a scratch network namespace)")
    return probe.available(Commands(), f"{PREFIX}{os.getpid()}")


def kernel_config() -> dict[str, str] | None:
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{RELEASE}")):
        if path.exists():
            text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
            return dict(line.split("=", 1) for line in text.splitlines() if line.startswith("CONFIG_"))
    return None


def module_file(name: str) -> bool:
    return any(Path(f"/lib/modules/{RELEASE}").rglob(f"{name}.ko*"))


def test_probe_agrees_with_the_kernel_config(found):
    config = kernel_config()
    if config is None:
        pytest.skip(f"no /proc/config.gz or /boot/config-{RELEASE} to compare with")
    expected = set()
    for kind, symbol in CONFIG.items():
        value = config.get(f"CONFIG_{symbol}")
        if value == "y" or (value == "m" and probe.modules_supported() and module_file(probe.module_of(kind))):
            expected.add(kind)
    assert found == expected


def test_probe_agrees_with_bare_tc(found):
    """A second witness: `tc qdisc add ... KIND` with tc's own defaults (or the least it accepts)."""
    minimal = {"red": ["red", "limit", "60000", "avpkt", "1000", "burst", "20"],
               # a burst above lo's MTU (65536), or the kernel warns on every run
               "tbf": ["tbf", "rate", "1mbit", "burst", "70kb", "limit", "70kb"]}
    c = Commands()
    ns = f"{PREFIX}{os.getpid()}-bare"
    c.run(["ip", "netns", "add", ns])
    try:
        for kind in CONFIG:
            if probe.modules_supported():
                c.ok(["modprobe", "-q", probe.module_of(kind)])
            proc = c.run(["tc", "qdisc", "add", "dev", "lo", "root", *minimal.get(kind, [kind])], ns=ns, check=False)
            assert (proc.returncode == 0) == (kind in found), (kind, proc.stderr)
            c.ok(["tc", "qdisc", "del", "dev", "lo", "root"], ns=ns)
    finally:
        c.ok(["ip", "netns", "del", ns])


def test_probe_leaves_nothing_and_caches(found):
    assert not any(n.startswith(f"{PREFIX}{os.getpid()}") for n in os.listdir("/run/netns"))
    log = Path(f"/tmp/{PREFIX}{os.getpid()}-probe.log")
    c = Commands(log)
    try:
        assert probe.available(c, f"{PREFIX}{os.getpid()}") == found
        assert not log.exists() or log.read_text() == ""  # answered from the per-release cache
    finally:
        log.unlink(missing_ok=True)
    assert {"pfifo", "bfifo", "htb"} <= found


def test_probe_is_one_shell_and_a_refused_parameter_is_our_bug(monkeypatch):
    """Every discipline in one `sh` (a process each cost 8.6 s of a TCG guest's start); a kind the kernel has but
    whose parameters it refuses is ccrig's bug, said with tc's words, not a missing feature."""
    log = Path(f"/tmp/{PREFIX}{os.getpid()}-one.log")
    ns = f"{PREFIX}{os.getpid()}-one"
    try:
        probe._try_all(Local(Commands(log)), ns, probe.modules_supported())
        logged = [line.split() for line in log.read_text().splitlines()]
        started = [w[2] for w in logged if w and w[0].replace(".", "").isdigit()]   # not the script's own lines
        assert started == ["ip", "ip", "sh", "ip"], started   # del (a killed probe's), add, the script, del
        monkeypatch.setattr(probe, "probes", lambda: {"pfifo": ("sch_fifo", ["pfifo", "limit", "nonsense"])})
        with pytest.raises(RunError, match='probing pfifo: .*Illegal value for "limit"'):
            probe._try_all(Local(Commands()), ns, probe.modules_supported())
    finally:
        log.unlink(missing_ok=True)
    assert ns not in os.listdir("/run/netns")


def preflight(argv: list[str], kind: str, tmp_path: Path, *extra: str, sweep: list[str] = ()
              ) -> tuple[int, str, str, int]:
    """`ccrig preflight` (argv: the command line to use) on a dumbbell whose bottleneck has discipline kind, or
    a sweep of the disciplines in sweep."""
    spec = tmp_path / f"{kind}.yaml"
    spec.write_text(f"name: needs-{kind}\ntopology: {{name: dumbbell, bottleneck: {{rate: 10mbit, buffer: 50pkt, "
                    f"qdisc: {kind}}}}}\nflows: [{{count: 1}}]\nduration: 3s\n"
                    + (f"sweep: {{topology.bottleneck.qdisc: [{', '.join(sweep)}]}}\n" if sweep else ""))
    proc = subprocess.Popen([*argv, "preflight", str(spec), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, proc.pid


def assert_refused(rc: int, out: str, err: str, pid: int, kind: str) -> None:
    assert rc == 2, out + err
    err = " ".join(err.split())
    assert f"queue discipline '{kind}' is not available in kernel {RELEASE}" in err
    assert "testbed: vm" in err and ("modprobe sch_" in err or "cannot load modules" in err)
    # nothing was set up, and the probe's scratch namespace is gone (ccrig names them ccrig-<pid>...)
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"ccrig-{pid}")]


CONSOLE = [str(Path(sys.executable).parent / "ccrig")]


def test_spec_with_a_discipline_this_kernel_lacks_fails_in_preflight(found, tmp_path):
    """Whichever case this kernel presents: where it lacks one of ccrig's disciplines, a spec naming it is
    refused before anything is set up; where it has them all (a distribution kernel), a spec naming each passes
    preflight with every discipline found."""
    missing = sorted(set(probe.probes()) - found - {"htb", "tbf", "netem"})
    if missing:
        kind = "fq" if "fq" in missing else missing[0]
        assert_refused(*preflight(CONSOLE, kind, tmp_path), kind)
        return
    # one preflight of a spec sweeping every discipline (one ccrig process each is minutes under TCG)
    kinds = sorted(set(probe.probes()) - {"htb", "tbf", "netem"})
    rc, out, err, _ = preflight(CONSOLE, kinds[0], tmp_path, "--json", sweep=kinds)
    needs = {n["feature"]: n["ok"] for n in json.loads(out)["needs"]}
    assert rc == 0 and all(needs[f"the {kind} queue discipline"] is True for kind in kinds), (needs, err)


def test_spec_with_a_discipline_no_kernel_has_fails_in_preflight(tmp_path):
    """A discipline no kernel has (tests/host/absent.py), probed on this kernel as any other: refused in
    preflight, with the way out, and nothing set up."""
    assert_refused(*preflight(absent.CCRIG, absent.KIND, tmp_path), absent.KIND)


class _SignalledLocal(Local):
    """This machine as the probe's Node, which sends its own process a real SIGINT at one of the probe's worst
    moments: right after `ip netns add` returned (the namespace exists, the probe has not yet noted it), or just
    before `ip netns del` starts (the teardown command must not be cut short)."""

    def __init__(self, commands: Commands, ns: str, moment: str):
        super().__init__(commands)
        self.target, self.moment, self.sent, self.started = ns, moment, False, False

    def run(self, argv, check=True, timeout=60, input=None):
        deleting = argv[:3] == ["ip", "netns", "del"] and argv[-1] == self.target and self.moment == "del"
        if deleting and self.started:
            self._interrupt()
        proc = super().run(argv, check=check, timeout=timeout, input=input)
        if argv[:3] == ["ip", "netns", "add"]:
            self.started = True
            if self.moment == "add":
                self._interrupt()
        return proc

    def _interrupt(self):
        if not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("moment", ["add", "del"])
def test_ctrl_c_in_the_probe_leaves_no_namespace(moment):
    ns = f"ccci-{os.getpid()}-{moment}-qprobe"
    # this test's own disposition, whatever pytest inherited (a background job ignores SIGINT)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        node = _SignalledLocal(Commands(), ns, moment)
        with pytest.raises(KeyboardInterrupt):   # a signal held during the teardown is raised as the probe ends
            probe._try_all(node, ns, probe.modules_supported())
    finally:
        signal.signal(signal.SIGINT, old)
    assert node.sent and ns not in os.listdir("/run/netns")
