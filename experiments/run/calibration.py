"""This machine's capacity for pairs side by side (`--jobs auto`, engine.py), measured once and cached.

    capacity(root, prefix, say) -> the calibration record (capacity_pps and how it was measured)

Short rounds of PAIRS pairs side by side (one per core: what the machine carries is every core's work), each pair
one reno flow (built into every kernel) through the netns dumbbell without added delay, nothing else of the run set
up yet. A round passes when every pair reaches goodput/T_max >= FULL with no core saturated by softirq
(SOFTIRQ_SATURATED). The first round's links run at START each; a round that passes doubles the rate for the next,
one that fails halves it, until a pass follows a fail or a fail follows a pass; then one round halfway between the
two (TRIES rounds at most). A round that fails is measured once more before it counts (the first is kept, marked
`repeated`): one busy moment halved the capacity (2026-12-05, just after `make deps`: 100 Mbit/s at 0.977 of
T_max left 37153 packets/s; measured again on the idle machine, 74306).
Shaped links are measured, not an unshaped ceiling: here an unshaped path carried 3 Gbit/s per pair (the shaper
never waited for tokens) where a shaper at 1.9 Gbit/s delivered 0.18 of its rate, its timer the bottleneck.
The capacity is the highest round that passed, in engine.pair_pps's unit (wire packets per second times the hops
each crosses, summed over its pairs): the engine admits pairs while the sum of their costs fits it. Each pair's fidelity verdict still
checks what the admission assumed (that costs add up), and a pair the machine could not carry is rerun alone.

The record is cached in ROOT/<kernel release>-<CPU>.json (keyed by the kernel release, the CPU model and the
number of cores: what the capacity depends on), with the runs' folders beside it. ROOT is this machine's ccrig
cache (~/.cache/ccrig/calibration), not the working folder: the capacity is the machine's, and a study run
from each study's own folder calibrated again every time; a lock makes a second run
that needs it wait for the first's measurement instead of measuring beside it. Delete the file to measure again
(after a kernel or CPU change the key changes by itself). The machine's load average when it was measured is
in the record: a calibration made on a busy machine is conservative, never optimistic.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Callable

from ccrig.commands import Commands
from ccrig.errors import RunError
from ccrig.machine import cache_dir
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import engine
from ccrig.experiments.run.repetition import Lent, Unit

ROOT = cache_dir() / "calibration"
START = 100e6             # bits/s per pair: four 100 Mbit/s pairs side by side read 0.99-1.0 of T_max here
DURATION, INTERVAL, WARMUP = "3s", "0.5s", 2   # 2 s judged after a 1 s ramp: at no added RTT it fills in ms
TRIES = 4
FULL = 0.98               # goodput/T_max every pair must reach (alone, the netns path reads 0.99-1.0)
SOFTIRQ_SATURATED = 0.5   # of a core's time in softirq: the packet path then competes with everything else
SECONDS = 30              # what the user is told it takes (setup and teardown included; 10 s here idle)
PAIRS = min(4, os.cpu_count() or 1)   # side by side in each run: what the machine carries is every core's work


def key() -> str:
    """What the capacity depends on: the kernel release, the CPU model, the number of cores."""
    model = cpu_model()
    digest = hashlib.sha256(f"{model}|{os.cpu_count()}".encode()).hexdigest()[:12]
    return f"{platform.release()}-{digest}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cached(root: Path = ROOT) -> dict | None:
    """The calibration of this kernel and CPU, if measured already."""
    path = root / f"{key()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def capacity(root: Path, prefix: str, say: Callable[[str], None] = print) -> dict:
    """The cached calibration, or a new one measured now (said before, with how long it takes, and after)."""
    root.mkdir(parents=True, exist_ok=True)
    found = cached(root)
    if found is not None:
        return found
    with open(root / f".{key()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another run measuring now: wait for its result, never measure beside it
        found = cached(root)
        if found is not None:
            return found
        say(f"calibrating this machine for --jobs auto (once per kernel and CPU: {2 * TRIES} rounds of {DURATION} at "
            f"most, about {SECONDS} s; cached in {root / (key() + '.json')})")
        t = time.monotonic()
        record = measure(root / key(), prefix)
        record["seconds"] = round(time.monotonic() - t, 1)
        tmp = root / f".{key()}.json.tmp"
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.rename(root / f"{key()}.json")
        say(f"calibrated in {record['seconds']:.0f} s: pairs side by side up to {record['capacity_pps']:.0f} wire "
            f"packets/s (hops counted)" + ("" if record["passed"] else
                                           " (no round passed: the machine was busy; kept the lowest)"))
        return record


def for_run(root: Path, prefix: str) -> dict | None:
    """What a run's env.json keeps of the calibration (measured now if not cached), or None when it cannot be
    cached here (no room or no right): with no measured capacity, pairs run one at a time."""
    try:
        record = capacity(root, prefix)
    except OSError as e:
        print(f"warning: --jobs auto: cannot keep the calibration in {root} ({e.strerror}); pairs run one at a time")
        return None
    kept = ("key", "kernel", "cpu_model", "cpus", "measured_at", "load_average", "capacity_pps", "passed", "seconds")
    return {**{k: record.get(k) for k in kept}, "cache": str(root / f"{record['key']}.json")}


def measure(folder: Path, prefix: str) -> dict:
    """Rounds from START up (doubling while they pass) or down (halving while they fail), then one halfway between
    the last pass and fail: the highest that passed."""
    if folder.exists():
        shutil.rmtree(folder)   # a killed calibration's runs: this one replaces them
    record = {"key": key(), "kernel": platform.release(), "cpu_model": cpu_model(), "cpus": os.cpu_count(),
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average": list(os.getloadavg()),
              "pairs": PAIRS, "rounds": [], "folder": str(folder)}
    rate, passed_at, failed_at = START, None, None
    for i in range(TRIES):
        check = _judged(rate, folder / f"round{i}", prefix)
        if not check["passed"]:
            record["rounds"].append({**check, "repeated": True})
            check = _judged(rate, folder / f"round{i}-again", prefix)
        record["rounds"].append(check)
        if check["passed"]:
            passed_at = max(passed_at or 0.0, rate)
        else:
            failed_at = min(failed_at or float("inf"), rate)
        if passed_at is None or failed_at is None:
            rate = rate * 2 if check["passed"] else rate / 2
        elif failed_at / passed_at > 1.5:
            # one round between the rate that passed and the one that failed: a doubling step alone halves the
            # capacity on a margin (kernel v1272: 200 Mbit/s at 0.511 of a core in softirq against 0.5 left
            # 49538 packets/s; measured again with this round, 150 Mbit/s read 0.514 and the capacity stood)
            rate = (passed_at + failed_at) / 2
        else:
            break
    passed = [r for r in record["rounds"] if r["passed"]]   # a repeated round failed: never among them
    best = max(passed, key=lambda r: r["offered_pps"], default=None)
    chosen = best or record["rounds"][-1]
    record.update(capacity_pps=chosen["offered_pps"], passed=best is not None)
    return record


def _judged(rate: float, out: Path, prefix: str) -> dict:
    """One round at `rate` bits/s a pair, and whether it passed."""
    check = _round(f"{max(1, int(rate / 1e6))}mbit", out, prefix)
    check["passed"] = check["goodput_of_t_max"] >= FULL and check["softirq_busiest_core"] < SOFTIRQ_SATURATED
    return check


def _round(rate: str, out: Path, prefix: str) -> dict:
    """PAIRS repetitions of one reno flow at `rate` each, side by side: what they carried together and what it
    cost the machine (one flow alone is bound by the hand-offs of its own pipeline, not by the machine)."""
    # the spec's defaults: the netns testbed, the dumbbell's drop-tail queue
    raw = {"name": "calibration",
           "topology": {"name": "dumbbell", "bottleneck": {"rate": rate, "buffer": "1000pkt"}},
           "flows": [{"cc": "reno"}], "duration": DURATION, "interval": INTERVAL, "warmup": WARMUP}
    exp = specmod.validate(raw, "calibration")
    point = specmod.points(raw, exp, "calibration")[0]
    records: dict[int, dict] = {}
    failed: list[str] = []

    def unit_of(pair: tuple, name: str) -> Unit:
        return Unit(point=point, rep=pair[1], out=out / f"pair{pair[1]}", prefix=name, laws={0: "reno"},
                    experiment="calibration", run_id=prefix)

    def finished(pair: tuple, entry: dict | None, error, beside: bool) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            records[pair[1]] = entry
    out.mkdir(parents=True, exist_ok=True)
    lent = Lent(Commands(out / "commands.log"))
    engine.side_by_side([(0, k) for k in range(PAIRS)], PAIRS, unit_of, prefix, lambda pair: lent, finished)
    fids = [r.get("fidelity") or {} for r in records.values()]
    if failed or len(fids) < PAIRS or any(f.get("goodput_of_t_max") is None for f in fids):
        raise RunError(f"calibration at {rate}: a run measured nothing ({'; '.join(failed) or 'no goodput'}; "
                       f"see {out})")
    shares = [f["goodput_of_t_max"] for f in fids]
    offered = PAIRS * engine.pair_pps(exp)
    return {"rate": rate, "pairs": PAIRS, "goodput_of_t_max": min(shares),
            "carried_bps": sum(shares) * engine.bottleneck_bps(exp),
            "offered_pps": offered, "carried_pps": sum(shares) / PAIRS * offered,
            "cpu_busy": max(f.get("cpu_busy") or 0.0 for f in fids),
            "cpu_busiest_core": max(f.get("cpu_busiest_core") or 0.0 for f in fids),
            "softirq_busiest_core": max(f.get("softirq_busiest_core") or 0.0 for f in fids)}
