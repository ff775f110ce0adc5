"""The C harness (tcp_modules/harness/cc_harness.c) for one family: built with gcc against that family's C law,
fed the family's vectors in its line format, its verdict read back."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


def harness_input(v: dict) -> str:
    """A family's vectors (families/NAME.vectors.json, parsed) as the harness's input lines."""
    lines = [f"tol {v['tolerance']['rel']!r} {v['tolerance']['abs']!r}"]
    for c in v["cases"]:
        s = c["params"]["slots"]
        lines.append(f"case {c['name']} {s['code']} {s['alpha']} {s['beta']} {s['k']} {s['l']} {s['terms']} "
                     f"{int(s['per_ack'])} {int(s['halve_first'])}")
        lines += [f"inc {w} {x!r}" for w, x in c["increase"]]
        lines += [f"loss {w} {x!r}" for w, x in c["loss"]]
        lines += [f"first {w} {x!r}" for w, x in c["first"]]
        for op, cwnd, acc, acked, x, seen in c["steps"]:
            lines.append(f"ack {cwnd} {acc!r} {acked} {x!r}" if op == "ack"
                         else f"lossstep {cwnd} {acc!r} {seen} {x!r}")
    return "\n".join(lines) + "\n"


def build(tcp_modules: Path, family: str, exe: Path) -> Path:
    """The harness with family's C law (tcp_modules/families/FAMILY.h), warnings as errors."""
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", f'-DCCRIG_LAW_FILE="../families/{family}.h"',
                    "-o", str(exe), str(tcp_modules / "harness" / "cc_harness.c"), "-lm"], check=True)
    return exe


def run(exe: Path, v: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe)], input=harness_input(v), capture_output=True, text=True, timeout=120)


def checks(v: dict) -> int:
    """How many values the harness compares for vectors v."""
    return sum(len(c["increase"]) + len(c["loss"]) + len(c["first"]) + len(c["steps"]) for c in v["cases"])


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
