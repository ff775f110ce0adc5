"""What a guest's ccrig imports to run specs: never the report's plotting (matplotlib). Under TCG matplotlib's
import takes ~10 s and, the guest's home being a fresh tmpfs each boot, its font cache is rebuilt every boot,
for nothing: the report is written on the host, after the guest is gone."""
import subprocess
import sys

import pytest

# the modules `ccrig study run` and `ccrig run` import in the guest before the first spec starts
GUEST_ENTRIES = ["ccrig.experiments.run.study", "ccrig.experiments.run.runner", "ccrig.experiments.cli.app"]


@pytest.mark.parametrize("module", GUEST_ENTRIES)
def test_running_specs_does_not_import_the_plots(module):
    # a fresh interpreter: this one may have imported anything already
    code = (f"import sys, {module}; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib' "
            "or m.startswith('ccrig.experiments.report'))))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == [], f"importing {module} imports {p.stdout.split()[:8]}"
