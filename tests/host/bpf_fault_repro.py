"""Reproduces and counts the kernel's BPF struct_ops fault (tcp_modules/bpf_fault.py) with no law of
ours involved: the kernel's own reno written as a BPF program (bpf_fault_repro.bpf.c), driven by `ccrig run`
on the law tests' path (10 Mbit/s htb + 24-packet pfifo on the router).

    sudo .venv/bin/python tests/host/bpf_fault_repro.py [REPETITIONS]      (default 40, about 6 s each)

Prints one JSON document: the loss episodes in the archived traces (entries into Recovery or Loss), the
reductions and ssthresh calls the program itself ran, how often tp->snd_ssthresh differed from what its
ssthresh had just returned (0 when the fault is the kernel skipping the program), and the repetitions and
samples the fault hit as summary.json records them (`kernel_fault`). A diagnostic, not a test: how often the
fault strikes depends on what else the machine runs (it needs a softirq on top of PID 1; see bpf_fault.py).
Needs root, clang and tcp_modules/build/vmlinux.h (`make -C tcp_modules bpf`).
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VMLINUX_DIR = ROOT / "tcp_modules" / "build"
NAME = "ccrig_repro"
RECOVERY, LOSS = 3, 4


def build(out: Path) -> Path:
    if not (VMLINUX_DIR / "vmlinux.h").exists():
        sys.exit(f"{VMLINUX_DIR / 'vmlinux.h'}: missing; run `make -C tcp_modules bpf` first")
    obj = out / "bpf_fault_repro.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", f"-I{VMLINUX_DIR}", "-c",
                    str(HERE / "bpf_fault_repro.bpf.c"), "-o", str(obj)], check=True)
    return obj


def counters() -> dict:
    """The program's global counters: its .bss map, found through the ssthresh program that uses it."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    # the newest of that name: the one just registered
    (map_id,) = max((p for p in progs if p.get("name") == "repro_ssthresh"), key=lambda p: p["id"])["map_ids"]
    dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(map_id)], capture_output=True,
                                     text=True, check=True).stdout)[0]
    out: dict = {}
    for entry in (dump.get("formatted") or dump)["value"][".bss"]:
        out.update(entry)
    return out


def loss_episodes(trace_csv: Path) -> int:
    n, prev = 0, 0
    with open(trace_csv) as f:
        for row in csv.DictReader(f):
            state = int(float(row["ca_state"]))
            n += state in (RECOVERY, LOSS) and prev not in (RECOVERY, LOSS)
            prev = state
    return n


def main(repetitions: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ccrig-bpf-fault-") as tmp:
        out = Path(tmp)
        obj = build(out)
        subprocess.run(["bpftool", "struct_ops", "register", str(obj)], check=True, capture_output=True)
        try:
            spec = {"name": "bpf-fault-repro", "testbed": "netns",
                    "topology": {"name": "dumbbell",
                                 "bottleneck": {"rate": "10mbit", "buffer": "24pkt", "qdisc": "pfifo"}},
                    "flows": [{"cc": NAME}], "duration": "5s", "interval": "1s", "warmup": 1,
                    "repetitions": repetitions}
            (out / "spec.yaml").write_text(yaml.safe_dump(spec))
            subprocess.run([sys.executable, "-c", "from ccrig.experiments.cli.app import main; main()", "run",
                            str(out / "spec.yaml"), "--out", str(out / "runs"), "--prometheus", "off",
                            "--no-progress"], check=True, capture_output=True, timeout=60 + 30 * repetitions)
            (rundir,) = (out / "runs").iterdir()
            summary = json.loads((rundir / "summary.json").read_text())
            reps = summary["points"][0]["repetitions"]
            faults = [f for r in reps for f in r["kernel_fault"]]
            c = counters()
            return {"repetitions": len(reps),
                    "loss_episodes_in_traces": sum(loss_episodes(p) for p in sorted(rundir.glob("points/*/rep*/trace.csv"))),
                    "program_reductions": c["n_reductions"], "program_ssthresh_calls": c["n_ssthresh"],
                    "ssthresh_not_what_the_program_returned": c["n_mismatch"],
                    "repetitions_hit": sum(1 for r in reps if r["kernel_fault"]),
                    "faults": sum(len(f["spans_s"]) for f in faults),
                    "samples_excluded": sum(f["excluded_samples"] for f in faults),
                    "samples": sum(f["samples"] for f in faults) if faults else None}
        finally:
            subprocess.run(["bpftool", "struct_ops", "unregister", "name", NAME], capture_output=True)


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40), indent=1))
