"""What the kernel's BPF struct_ops fault spoils (analysis/samples.py's docstring holds the numbers): per measured
interval, the flows the fault did not hit (their goodput over their fair share) and the system (Jain's index over
throughput, EEE, loss), grouped as intervals a fault's span touched, the interval right after one, intervals later
in a repetition with a fault, and repetitions without one.

    sudo .venv/bin/python tests/host/bpf_fault_spoils.py RUN_DIR [RUN_DIR ...]

The runs it was written for: study 001's per_10mbit spec without its sweep (ab_standard, PER 0.01, 12 s, 2 warm-up
intervals), `--set flows[0].count=6 --set repetitions=12` and 30 flows with 10 repetitions, `--jobs 4`; and the
same with the kernel's built-in reno (never skipped) as the yardstick. A diagnostic, not a test: how often the fault
strikes depends on what else the machine runs.
"""
from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path


def _group(i: int, touched: set, any_fault: bool) -> str:
    if not any_fault:
        return "no fault in the repetition"
    return "touched" if i in touched else "the interval after" if i - 1 in touched else "later"


def repetition(d: Path, warmup: int, groups: dict) -> None:
    rep = json.loads((d / "repetition.json").read_text())
    faults = rep.get("kernel_fault") or []
    hit = {f["flow"] for f in faults}
    spans = [s for f in faults for s in f["spans_s"]]
    rows = list(csv.DictReader(open(d / "intervals.csv")))
    touched = {int(x["interval"]) for x in rows if x["flow"] == "all"
               and any(float(x["t_start"]) < b and float(x["t_end"]) > a for a, b in spans)}
    for x in rows:
        i = int(x["interval"])
        if i < warmup:
            continue
        g = groups.setdefault(_group(i, touched, bool(faults)), {})
        if x["flow"] == "all":
            for m in ("jain_throughput", "eee", "loss"):
                g.setdefault(m, []).append(float(x[m]))
        elif x["flow"].isdigit() and float(x["fair_share_bps"] or 0) > 0:
            share = float(x["goodput_bps"]) / float(x["fair_share_bps"])
            g.setdefault("faulted flows' goodput/share" if int(x["flow"]) in hit else
                         "other flows' goodput/share", []).append(share)


def main(runs: list[str]) -> dict:
    out = {}
    for run in runs:
        summary = json.loads((Path(run) / "summary.json").read_text())
        groups: dict = {}
        for d in sorted(Path(run).glob("points/*/rep*")):
            if (d / "repetition.json").is_file():
                repetition(d, summary.get("warmup", 1), groups)
        out[Path(run).name] = {g: {m: {"mean": round(statistics.fmean(v), 4), "sd": round(statistics.stdev(v), 4)
                                       if len(v) > 1 else None, "n": len(v)} for m, v in ms.items()}
                               for g, ms in groups.items()}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
