"""Fault survival and signals in every phase, on real namespaces, iperf3 and
Prometheus: a program killed mid-run fails its repetition and the run goes on; a Prometheus gone mid-run loses
nothing; an unwritable or full --out is one line before set-up; two runs of one spec do not collide; SIGTERM
tears down as SIGINT does; SIGKILL then `ccrig clean` leaves nothing; SIGINT in any phase ends a run in seconds."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CCRIG, ROOT, dumbbell, leftovers
from support.interrupt import SIGNAL_BOUND, default_sigint

pytestmark = pytest.mark.timeout(90)


def _ns_pids(pid: int) -> list[int]:
    """The processes inside the namespaces of the ccrig run with this pid."""
    out = []
    for ns in leftovers(pid):
        if ns.startswith("ccrig-"):
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            out += [int(x) for x in r.stdout.split()]
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    """The run's own children (its sampler is one), looked up fast enough to catch a phase of a second."""
    return [int(x) for x in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        r = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True)
        kids = [int(x) for x in r.stdout.split()]
        out += kids
        todo += kids
    return out


def _wait(cond, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return None


def _intervals(ccrig) -> int:
    """Rows written so far in the intervals.csv of the point measured first (sweeps run in a seeded order)."""
    f = list(ccrig.tmp.glob("runs/*/points/*/rep0/intervals.csv"))
    return f[0].read_text().count("\n") - 1 if f else 0


def _sweep(ccrig, duration="4s"):
    spec = dumbbell([{"cc": "reno"}], duration=duration)
    spec["sweep"] = {"topology.bottleneck.buffer": ["20pkt", "40pkt"]}
    return ccrig.write(spec)


def _start(ccrig, path, *extra):
    return subprocess.Popen(ccrig.argv(path, *extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)


@pytest.mark.parametrize("victim", ["iperf3 --server", "/sampler"])
def test_a_killed_program_fails_its_repetition_and_the_run_goes_on(ccrig, victim):
    # the point measured first has its program killed after two intervals (one pair at a time: side by side, the
    # other point's programs of the same name would be killed too)
    p = _start(ccrig, _sweep(ccrig), "--jobs", "1")
    assert _wait(lambda: _intervals(ccrig) >= 2, 60), "the first point never measured"
    pids = [q for q in _ns_pids(p.pid) + _descendants(p.pid) if victim in _cmdline(q)]
    assert pids, f"no {victim} of run {p.pid}"
    for q in set(pids):
        os.kill(q, signal.SIGKILL)
    out, err = p.communicate(timeout=75)
    assert p.returncode == 1, err
    assert "repetition(s) failed" in err.splitlines()[-1] and err.count("Traceback") == 0, err
    summary = ccrig.summary()   # parses: the archive stays valid
    failed = [q for q in summary["points"] if "failed" in q]
    ok = [q for q in summary["points"] if "failed" not in q]
    assert len(failed) == len(ok) == 1, summary["points"]
    failed, ok = failed[0], ok[0]
    assert failed["failed"] and failed["failed_repetitions"][0]["rep"] == 0, failed
    assert "system" in ok and ok["system"]["goodput_bps"]["mean"] > 0 and summary["complete"] is True
    assert summary["failed"] == 1
    assert leftovers(p.pid) == []


def test_prometheus_stopped_mid_run_loses_no_sample_and_backfill_works(ccrig_prom, prometheus):
    from ccrig.experiments.telemetry.backfill import LOG_NAME, backfill
    prometheus.ensure(1.0)
    p = _start(ccrig_prom, ccrig_prom.write(dumbbell([{"cc": "reno"}], duration="5s")))
    assert _wait(lambda: _intervals(ccrig_prom) >= 1, 60)
    prometheus.stop()
    out, err = p.communicate(timeout=75)
    assert p.returncode == 0, err
    run = ccrig_prom.run_dirs()[0]
    assert _intervals(ccrig_prom) == 5 * 2   # each interval: the flow's row and the system's
    log = (run / LOG_NAME).read_text().splitlines()
    stamps = {json.loads(line).get("ts") for line in log if line.startswith("{")}
    assert len(log) > 5 and len(stamps) >= 5, log[:3]
    blocks = backfill(run, prometheus.root / "data")
    assert blocks and all((b / "meta.json").is_file() for b in blocks)
    assert leftovers(p.pid) == []


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_unwritable_or_full_out_is_one_line_before_set_up(ccrig, tmp_path, fault):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if fault == "read-only":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64m", "tmpfs", str(mnt)], check=True)
    else:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        path = ccrig.write(dumbbell([{"cc": "reno"}], duration="3s"))
        argv = [*CCRIG, "run", str(path), "--out", str(mnt / "runs"), "--no-progress", "--prometheus", "off"]
        p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []   # namespaces of this run, looked for while it goes: none may be made
        while p.poll() is None:
            seen += leftovers(p.pid)
            time.sleep(0.02)
        out, err = p.communicate()
    finally:
        subprocess.run(["umount", str(mnt)])
    assert p.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith("ccrig: error: --out ") and "Traceback" not in err, err
    assert ("cannot write" in err) if fault == "read-only" else ("MiB free" in err)
    assert seen == [] and leftovers(p.pid) == []


def test_two_runs_of_one_spec_at_once_do_not_collide(ccrig):
    path = ccrig.write(dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="4s"))
    a, b = _start(ccrig, path), _start(ccrig, path)
    ra, rb = a.communicate(timeout=80), b.communicate(timeout=80)
    assert (a.returncode, b.returncode) == (0, 0), (ra[1], rb[1])
    runs = ccrig.run_dirs()
    assert len(runs) == 2 and {r.name.rsplit("-", 1)[-1] for r in runs} == {str(a.pid), str(b.pid)}
    for r in runs:
        assert json.loads((r / "summary.json").read_text())["complete"] is True
    assert leftovers(a.pid) == [] and leftovers(b.pid) == []


def test_sigterm_tears_down_as_sigint_does(ccrig):
    p = _start(ccrig, ccrig.write(dumbbell([{"cc": "reno"}], duration="20s")))
    assert _wait(lambda: _intervals(ccrig) >= 2, 60)
    kids = _descendants(p.pid)
    t = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t
    assert p.returncode == 143, err
    assert "interrupted (SIGTERM)" in err and "everything was torn down" in err, err
    assert leftovers(p.pid) == [] and not [k for k in kids if _cmdline(k)], took
    assert json.loads((ccrig.run_dirs()[0] / "summary.json").read_text())["complete"] is False
    assert took < SIGNAL_BOUND, took


def _available_ccs() -> set[str]:
    return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())


def test_sigkill_then_ccrig_clean_leaves_nothing(ccrig):
    before = _available_ccs()
    p = _start(ccrig, ccrig.write(dumbbell([{"cc": "reno"}, {"cc": "cubic"}], duration="30s")))
    assert _wait(lambda: _intervals(ccrig) >= 1, 60)
    kids = _descendants(p.pid) + _ns_pids(p.pid)
    p.kill()
    p.communicate()
    assert leftovers(p.pid), "a killed run leaves its namespaces behind"
    c = subprocess.run([*CCRIG, "clean", "--prefix", f"ccrig-{p.pid}-"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert c.returncode == 0, c.stderr
    assert leftovers(p.pid) == []
    assert _wait(lambda: not [k for k in kids if _cmdline(k)], 5), [_cmdline(k) for k in kids if _cmdline(k)]
    assert not subprocess.run(["pgrep", "-f", f"ccrig-{p.pid}-"], capture_output=True).stdout
    assert _available_ccs() <= before | {c for c in _available_ccs() if not str(p.pid) in c}
    assert not [c for c in _available_ccs() if str(p.pid) in c]


# --- SIGINT ends a run within seconds in every phase -------------------------------------------
FLOWS = 30


def _phase_reached(ccrig, p, phase: str) -> bool:
    if phase == "set-up":
        return bool(leftovers(p.pid))
    if phase == "sampler start":
        # the servers are started and no sender yet: the sampler is being readied (the run's commands.log says)
        log = "".join(f.read_text() for f in ccrig.tmp.glob("runs/*/commands.log"))
        return "--server" in log and "--client" not in log
    if phase == "measurement":
        return _intervals(ccrig) >= 1
    # teardown: every interval is written and the sampler stopped, the namespaces are still there
    if _intervals(ccrig) < 3 * (FLOWS + 1):
        return False
    return not any("/sampler" in _cmdline(k) for k in _children(p.pid)) and bool(leftovers(p.pid))


@pytest.mark.parametrize("phase", ["set-up", "sampler start", "measurement", "teardown"])
def test_sigint_in_every_phase_of_a_30_flow_run_ends_it_and_leaves_nothing(ccrig, phase):
    import random
    p = _start(ccrig, ccrig.write(dumbbell([{"cc": "reno"}] * FLOWS, duration="3s", rate="100mbit")))
    assert _wait(lambda: _phase_reached(ccrig, p, phase), 60, step=0.01), f"{phase} never seen"
    time.sleep(random.uniform(0, 0.2))
    kids = _descendants(p.pid)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    took = time.monotonic() - t
    print(f"phase {phase}: exited {p.returncode} {took:.2f} s after SIGINT")
    assert p.returncode in (0, 130), err
    assert leftovers(p.pid) == [] and not [k for k in kids if _cmdline(k)]
    assert took < SIGNAL_BOUND, f"{phase}: {took:.2f} s"


@pytest.mark.parametrize("after", [0.1, 0.2, 0.4, 0.8])
def test_sigint_while_the_command_line_loads_is_one_line(ccrig, after):
    # the command line's imports take about a second here; a Ctrl-C among them is an interrupt like any other.
    # `after` counts from ccrig's own first module, which Python's import log names as it is imported: counted
    # from the start of the process, a busy machine put the signal into the interpreter's start-up (site), which
    # is Python's and ends "Fatal Python error" whatever ccrig does
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    p = subprocess.Popen(ccrig.argv(ccrig.write(dumbbell([{"cc": "reno"}], duration="3s"))), cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    seen = []
    for line in p.stderr:   # ends when the child does: a child that never imported ccrig fails below
        seen.append(line)
        if line.rstrip().endswith("| ccrig.experiments.cli.entry"):
            break
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    err = "".join(seen) + err
    assert any(line.rstrip().endswith("| ccrig.experiments.cli.entry") for line in seen), err[-2000:]
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("import time:"))
    assert p.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("ccrig: interrupted"), err
    assert leftovers(p.pid) == []


def test_ctrl_c_again_during_teardown_says_what_remains_and_still_cleans(ccrig):
    # a run far longer than the wait for its first rows: Ctrl-C lands mid-measurement, not in the run's own end
    # on a busy machine (seen: a 5 s run whose first Ctrl-C met its last 0.2 s, and nothing left to say)
    p = _start(ccrig, ccrig.write(dumbbell([{"cc": "reno"}] * FLOWS, duration="60s", rate="100mbit")))
    assert _wait(lambda: _intervals(ccrig) >= FLOWS + 1, 80, step=0.01)
    kids = _descendants(p.pid)
    t = time.monotonic()
    while p.poll() is None and time.monotonic() - t < 30:   # a researcher leaning on Ctrl-C
        p.send_signal(signal.SIGINT)
        time.sleep(0.05)
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t
    print(f"repeated Ctrl-C: exited {p.returncode} {took:.2f} s after the first")
    assert p.returncode == 130, err
    said = [line for line in err.splitlines() if line.startswith("ccrig: still cleaning up")]
    assert said and "Traceback" not in err, err
    assert leftovers(p.pid) == [] and not [k for k in kids if _cmdline(k)]
    assert took < SIGNAL_BOUND, took
