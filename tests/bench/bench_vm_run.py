"""A run's cost inside a vm guest, phase by phase: keshav's s7_tandem at its quick point (2 reno FTPs and 4
Poisson sources over a 3-hop tandem, 6 s of traffic in 2 s intervals) run by `ccrig run` in one boot, testbed
netns inside the guest. From the run's own commands.log (seconds since the run began): when the first flow
started (Python's start, set-up and everything before the traffic), how far apart the queues' readings at the
interval boundaries fell (the interval's work: 2 s when it keeps up), and when the namespaces were deleted; the
run's and the session's wall time, and how many repetitions ran again. Under TCG these are what a study's guest
spends per spec."""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ccrig.experiments.run.study import resolved
from ccrig.experiments.run.study_file import load
from ccrig.topologies.testbeds import vm

SPEC = "s7_tandem"
LINE = re.compile(r"\s+(\d+\.\d+)\s+\S+\s+(.*)")


def _spec(folder: Path) -> Path:
    study, studies = load("keshav")
    entry = next(e for e in study.specs if e.spec == SPEC)
    _, raw, _ = resolved(studies, study, entry, quick=True, testbed="netns")
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _phases(log: Path) -> dict:
    rows = [(float(m.group(1)), m.group(2)) for m in map(LINE.match, log.read_text().splitlines()) if m]
    clients = [t for t, c in rows if "iperf3 --client" in c]
    reads = [(t, c) for t, c in rows if "tc -s -j qdisc show" in c]
    queues = len({c for _, c in reads})   # a round reads every queue once, side by side
    rounds = [t for t, _ in reads[::queues]] if queues else []
    deleted = [t for t, c in rows if "ip -force -batch" in c]
    return {"first_flow_s": round(clients[0], 1) if clients else None,
            "boundary_gaps_s": [round(b - a, 1) for a, b in zip(rounds, rounds[1:])],
            "namespaces_deleted_s": round(deleted[-1], 1) if deleted else None}


def run() -> dict:
    kernel = vm.find_kernel()
    mode = vm.accel_mode(kernel)
    folder = Path(tempfile.mkdtemp(prefix="ccbench-vmrun-", dir=Path.home()))   # not /tmp: the guest's own
    try:
        spec = _spec(folder)
        timed = ("import subprocess, sys, time; t = time.monotonic(); r = subprocess.run(sys.argv[1:]); "
                 "print('run_s', round(time.monotonic() - t, 2), r.returncode)")
        ccrig = [sys.executable, "-c", "from ccrig.experiments.cli.entry import main; main()", "run", str(spec),
                 "--out", str(folder / "runs"), "--prometheus", "off", "--no-progress"]
        lines: list[str] = []
        t0 = time.monotonic()
        status = vm.run_in_guest([sys.executable, "-c", timed, *ccrig], kernel=kernel, accel=mode, timeout=1500,
                                 rwdirs=(folder,), output=lines.append)
        session = time.monotonic() - t0
        done = [l.split() for l in lines if l.startswith("run_s ")]
        logs = sorted(folder.glob("runs/*/commands.log"))
        if status != 0 or not done or done[0][2] != "0" or not logs:
            raise RuntimeError(f"the guest's run failed (status {status}): {''.join(lines)[-2000:]}")
        # a spoiled repetition runs again in the same run: its readings follow the first attempt's
        reruns = len(json.loads((logs[0].parent / "summary.json").read_text()).get("reruns", []))
        return {"kernel": kernel.release, "accel": mode, "spec": f"keshav/{SPEC} (quick point, netns in the guest)",
                "run_s": float(done[0][1]), "session_s": round(session, 1), "reruns": reruns, **_phases(logs[0]),
                "cpus": vm.CPUS, "memory": vm.MEMORY}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
