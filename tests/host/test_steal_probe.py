"""experiments/run/steal.py's probe on this machine: it keeps every core busy for its time and reads the steal
over it from /proc/stat, as an independent reading taken around it does; Ctrl-C or SIGTERM during it leaves no
spinner behind."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ccrig.experiments.run import fidelity, steal


def test_the_probe_loads_every_core_and_reads_the_steal_over_it():
    before = fidelity.cpu_times()
    t0 = time.monotonic()
    stolen, busy = steal.probe(2.0)
    took = time.monotonic() - t0
    after = fidelity.cpu_times()
    assert 2.0 <= took < 10.0
    # the reading taken around the probe: every core busy (the spinners, stolen time counted busy) ...
    around = fidelity.busy_between(before, after)
    assert busy >= steal.LOADED and min(v for c, v in around.items() if c != "cpu") >= steal.LOADED * 0.8
    # ... and the steal the probe read lies within what the machine's own counters allow around it
    outer = fidelity.busy_between(before, after, 3)["cpu"]
    assert 0.0 <= stolen <= 1.0 and stolen <= outer * took / 2.0 + 0.02
    assert not [p for p in __import__("multiprocessing").active_children() if p.name == "ccrig-steal-probe"]


def _same_command(marker: str) -> list[int]:
    """The processes whose command line holds the marker (the probe's spinners are forks of its process)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def test_a_signal_during_the_probe_leaves_no_spinner(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGINT):
        marker = f"ccrig-steal-test-{os.getpid()}-{sig.name}"
        code = ("import sys\nfrom ccrig.experiments.run import signals, steal\n"
                f"# {marker}\n"
                "with signals.trapped():\n"
                "    try:\n        steal.probe(60.0)\n"
                "    except signals.Interrupted as e:\n        print('interrupted', e)\n        sys.exit(3)\n")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        # readiness: the spinners are running (one per core, beside the probe's own process)
        while len(_same_command(marker)) < 1 + (os.cpu_count() or 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_same_command(marker)) == 1 + (os.cpu_count() or 1)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 3 and out.strip() == f"interrupted {sig.name}"
        assert _same_command(marker) == []
