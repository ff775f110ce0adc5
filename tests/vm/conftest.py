"""The vm tier. tests/vm/test_vm_tier.py boots one guest (a distribution kernel under virtme-ng) and runs
`pytest tests/vm/guest` inside it; the guest tests are collected only there, never by the outer pytest."""
import os

import pytest

from ccrig.topologies.testbeds.vm import in_guest

collect_ignore = [] if in_guest() else ["guest"]


@pytest.fixture(scope="session", autouse=True)
def calibrated_first(calibrated):
    """tests/conftest.py's calibration, before this tier's first test."""


@pytest.fixture(autouse=True)
def ahead_of_the_host_tier(request):
    """The vm group is the suite's critical path (its guests emulate a CPU: boot, set-up and every process start
    are slow), while the host tier beside it finishes with time to spare: the worker that runs the group, and the
    guests it starts, get most of the two cores (nice -10) when both want them; the guest's qemu, in a session
    of its own, gets it through its autogroup (ccrig.commands.keep_priority). Not a study of this folder that
    runs on the host (a group of its own, on a host tier's worker)."""
    group = request.node.get_closest_marker("xdist_group")
    if group is None or group.args[0] != "vm" or in_guest() or os.geteuid() != 0:
        yield
        return
    # restored after the test: the worker runs other tiers' tests next, which must not inherit it (a unit test of
    # the caller's nice read -3 for 7 on that worker, 2026-11-28)
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, -10)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)
