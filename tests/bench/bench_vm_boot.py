"""The vm testbed's fixed cost, from one boot: how long until the guest runs a command (boot), how long the
guest's Python takes to import the runner (the first thing a run in the guest does), and the whole session
to power-off, with the virtualisation mode (kvm or tcg) it ran under."""
from __future__ import annotations

import sys
import time

from ccrig.topologies.testbeds import vm

MARK = "ccrig-guest-up"
IMPORT = ("import time; t = time.monotonic(); import ccrig.experiments.run.runner; "
          "print('import_runner_s', round(time.monotonic() - t, 3))")


def run() -> dict:
    kernel = vm.find_kernel()
    t = time.monotonic()
    mode = vm.accel_mode(kernel)
    probe_s = time.monotonic() - t
    seen: dict[str, float] = {}
    lines: list[str] = []

    def output(line: str) -> None:
        lines.append(line)
        if MARK in line and "boot_s" not in seen:
            seen["boot_s"] = time.monotonic() - t0

    t0 = time.monotonic()
    status = vm.run_in_guest(["sh", "-c", f"echo {MARK}; {sys.executable} -c \"{IMPORT}\""], kernel=kernel,
                             accel=mode, timeout=600, output=output)
    total = time.monotonic() - t0
    imported = [float(l.split()[1]) for l in lines if l.startswith("import_runner_s ")]
    if status != 0 or "boot_s" not in seen or not imported:
        raise RuntimeError(f"guest session failed (status {status}): {''.join(lines)[-2000:]}")
    return {"kernel": kernel.release, "accel": mode, "accel_probe_s": round(probe_s, 3),
            "boot_s": round(seen["boot_s"], 2), "import_runner_s": imported[0], "session_s": round(total, 2),
            "cpus": vm.CPUS, "memory": vm.MEMORY}
