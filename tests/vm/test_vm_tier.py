"""The vm tier in one boot: a distribution kernel under virtme-ng runs `pytest tests/vm/guest` and this test
passes only if every guest test ran and passed. A boot costs 20-30 s of both cores under TCG, so the guest
tests share it; their output streams here as it comes, and a failure lists the guest's failures.

CCRIG_GUEST_PYTEST_ARGS (e.g. "tests/vm/guest/test_kernel.py -k netem") narrows what the guest runs, for a
developer working on one guest test; CI runs the whole folder but the tests marked slow_guest (minutes each under
TCG), which `make test-vm-slow` runs, plus the host tests that branch on the kernel (HOST_TESTS_BOTH_WAYS).
"""
from __future__ import annotations

import os
import shlex
import sys
import xml.etree.ElementTree as ET

import pytest

from ccrig.commands import Commands
from ccrig.experiments.run.collectors import native_sampler
from ccrig.topologies.testbeds import vm

GUEST_TESTS = "tests/vm/guest"
# host-tier tests whose outcome depends on what the kernel has: they run here too, so each branch is exercised on a
# kernel that lacks the feature (this machine's) and on one that has it (the distribution kernel's)
# (test_qdisc_probe.py's refusal of a discipline no kernel has is left out: 34 s of the guest for what
# test_run_lifecycle.py's refusal of the same discipline on the distribution kernel covers)
HOST_TESTS_BOTH_WAYS = ["tests/host/test_qdisc_probe.py",
                        "--deselect", "tests/host/test_qdisc_probe.py::"
                                      "test_spec_with_a_discipline_no_kernel_has_fails_in_preflight",
                        "tests/host/test_cc_generic.py",   # its law as BPF here, as a module there
                        "tests/host/test_run_lifecycle.py::test_missing_kernel_feature_fails_before_setup",
                        "tests/host/test_mininet.py::test_kernel_datapath_is_checked_before_setup"]
# s: the whole guest session (boot, the guest tests under TCG, power-off): 962 s alone, 1074 s in CI beside the
# host tier (2026-11-28)
BOOT_TIMEOUT = 2400


def guest_failures(junit_xml) -> tuple[int, list[str]]:
    """How many guest tests ran, and one line per failed or errored one (its id and its message)."""
    root = ET.parse(junit_xml).getroot()
    ran, failed = 0, []
    for case in root.iter("testcase"):
        ran += 1
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            name = f"{case.get('classname')}::{case.get('name')}"
            message = (bad.get("message") or "").strip().splitlines()
            failed.append(f"{name}: {message[0] if message else bad.tag}")
    return ran, failed


@pytest.mark.vm
@pytest.mark.timeout(BOOT_TIMEOUT + 120)
def test_guest_tier(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("the vm tier needs root (the guest runs as root with the host's file system)")
    kernel = vm.find_kernel()
    mode = vm.accel_mode(kernel)
    # the laws' modules built here for the guest's kernel: else test_cc_modules.py builds them in the guest,
    # minutes of compiling under TCG when no host test built them first
    vm.prebuild.for_guest(kernel, Commands(None))
    native_sampler(Commands(None))   # as `ccrig run` does before a guest: found there in this machine's cache
    junit = tmp_path / "guest.xml"
    selection = shlex.split(os.environ.get("CCRIG_GUEST_PYTEST_ARGS", "")) or [GUEST_TESTS, *HOST_TESTS_BOTH_WAYS,
                                                                         "-m", "not slow_guest"]
    # --durations: the guest tests' own times, which the outer pytest sees only as this one test's
    argv = [sys.executable, "-m", "pytest", "-ra", "--durations=15", "-p", "no:cacheprovider", f"--junitxml={junit}",
            *selection]
    with capsys.disabled():
        print(f"\n[vm] booting {kernel.release} ({mode}) for: {shlex.join(argv[1:])}", flush=True)
        # the guest gets two e1000e NICs on a private hub for the PAUSE tests (ethtool -A needs a real driver)
        status = vm.run_in_guest(argv, kernel=kernel, accel=mode, timeout=BOOT_TIMEOUT, rwdirs=(tmp_path,),
                                 qemu_opts=vm.E1000E_QEMU_OPTS,
                                 output=lambda line: print(f"[guest] {line}", end="", flush=True))
    assert junit.is_file(), f"the guest's pytest wrote no report (exit status {status}); its output is above"
    ran, failed = guest_failures(junit)
    assert ran > 0, f"the guest collected no tests from {selection} (exit status {status})"
    if failed or status != 0:
        pytest.fail(f"{len(failed)} of {ran} guest tests failed on {kernel.release} ({mode}), exit status {status}:"
                    + "".join(f"\n  {line}" for line in failed), pytrace=False)
