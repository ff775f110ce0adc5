"""Test tiers: unit (pure), host (root, the running kernel), vm (a distribution kernel under virtme-ng).

In CI (CI=true) a skip is a failure: nothing may be skipped for lack of something `make deps` installs.

Parallel runs (`make test`: pytest-xdist, `-n N --dist loadgroup`): each test file is one unit of work, run on one
worker from start to end, so a file's module-scoped fixtures are made once and its tests never race each other;
files run side by side, every name a test makes carries its process id. Tests that share something machine-wide
with other files name one group with `pytestmark = pytest.mark.xdist_group("NAME")` and run one after another
on one worker (tests/host/test_hosts_*.py: the users and sudoers files of the SSH test bed). The vm tier's tests
are one group, run at a higher priority than the host tier's (tests/vm/conftest.py): two TCG guests at once
each take far longer (tried, as two groups: the guest tier 2218 s instead of 670, keshav's quick study 1333 s
instead of 725, the whole suite 38 min instead of 32), and their host-side builds of the laws' modules raced in
one tree (now under a lock: topologies/testbeds/vm/prebuild.py). Tried again on 2026-11-26 with keshav's quick
study dealt last, to the first worker the host tier freed: it started at 15 min beside the guest tier (which the
vm group's first-run and vm testbed tests had pushed to 9.5 min) and both guests still ran at 33 min.
"""
import os
import signal
import time
from pathlib import Path

import pytest

from support import steal

TIERS = ("unit", "host", "vm")
VM_LAST = ("test_a_study_by_kernel_has_one_column_per_kernel", "test_the_four_seed_studies_are_there")
_spans: dict[str, list[float]] = {}
_workers: dict[str, list[float]] = {}


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in TIERS else "other"


def _calibrate() -> None:
    """This machine's capacity for `--jobs auto` (the default), measured if it is not cached yet. Not without
    root, nor where CCRIG_JOBS names a number (a vm guest: its runs never calibrate, its checkout is read-only)."""
    if os.geteuid() != 0 or os.environ.get("CCRIG_JOBS", "auto") != "auto":
        return
    from ccrig.experiments.run import calibration
    calibration.capacity(calibration.ROOT, f"ccrig-{os.getpid()}-cal")


@pytest.hookimpl(tryfirst=True)   # before xdist starts its workers (its own sessionstart is trylast)
def pytest_sessionstart(session):
    """Calibrate on the controller before any worker exists, when host or vm tests may run: the machine is then
    idle. Asked by the first host or vm test instead, it ran while the other workers collected and ran unit tests,
    passed no round, and left --jobs auto at one pair (CI on 2026-11-27: test_jobs's admission test failed)."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    tests = Path(__file__).resolve().parent
    here = config.invocation_params.dir
    paths = [(here / a.split("::")[0]).resolve() for a in config.args] or [here]
    if any(p in (tests, tests.parent) or p.is_relative_to(tests / "host") or p.is_relative_to(tests / "vm")
           for p in paths):
        _calibrate()


@pytest.fixture(scope="session")
def calibrated():
    """The calibration, before any host or vm test (autouse in both tiers' conftest): measured by the controller
    at the session's start (pytest_sessionstart), else here (every worker asks; one measures, the others wait on
    its lock), so no test's run pays for it or meets its traffic, and no guest boots beside it."""
    _calibrate()


def _terminated(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def pytest_configure(config):
    # SIGTERM (a CI job's timeout, a killed make) ends the session as Ctrl-C would: fixtures tear down and finally
    # blocks run in every worker, so a guest's qemu (a session of its own, which a signal to this process group
    # does not reach) is stopped and what the tests set up is removed; by default Python would just die
    signal.signal(signal.SIGTERM, _terminated)


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        path = Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
        item.add_marker(pytest.mark.xdist_group("vm" if path.startswith("tests/vm/") else path))
    # xdist deals a worker its next file once two of its tests are left, and that file waits behind them: the vm
    # group ends with its two shortest, so what waits on its worker waits 2 minutes, not the guest tier's 12 (CI on
    # a6962a1: the fleet's 4-minute file sat behind the last two guests while the other workers idled)
    vm = [k for k, i in enumerate(items) if i.get_closest_marker("xdist_group").args[0] == "vm"]
    ordered = sorted((items[k] for k in vm), key=lambda i: VM_LAST.index(i.originalname) + 1
                     if i.originalname in VM_LAST else 0)
    for k, item in zip(vm, ordered):
        items[k] = item


def pytest_collection_finish(session):
    # xdist carries a test's group in its node id (`...@group`); a pytest whose node ids ignore that (9.2 with
    # xdist 3.8: pytest-xdist issue 1386) would run grouped files side by side without a word
    if getattr(session.config.option, "loadgroup", False) and any("@" not in i.nodeid for i in session.items):
        raise pytest.UsageError("pytest-xdist's --dist loadgroup does not group with this pytest: every test would "
                                "run anywhere; install pytest and pytest-xdist as pyproject.toml's test extra pins")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """The host and vm tiers measure on a CPU the hypervisor shares: a failure while it took the CPU runs again
    (tests/support/steal.py); the unit tier is pure."""
    if _tier(item.nodeid) in ("host", "vm"):
        return steal.protocol(item, nextitem)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI, which counts as a failure: {reason}"


def _add(spans: dict[str, list[float]], key: str, report) -> None:
    span = spans.setdefault(key, [float("inf"), 0.0, 0.0])
    span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
    span[2] += report.duration


def pytest_runtest_logreport(report):
    # every phase's start and stop (a worker's reports carry them to the controller): each tier's span, and each
    # xdist worker's (the worker that ends last is the critical path, the others' idle time its slack)
    _add(_spans, _tier(report.nodeid), report)
    _add(_workers, getattr(report, "worker_id", None) or "main", report)
    steal.note(report)


def pytest_terminal_summary(terminalreporter):
    """Each tier's time, so the change that slows CI is seen at once: from its first test's start to its last
    test's end (tiers overlap when run in parallel), and its tests' durations added up."""
    steal.summary(terminalreporter)
    if not _spans:
        return
    terminalreporter.section("time per tier")
    for tier in (*TIERS, "other"):
        if tier in _spans:
            first, last, busy = _spans[tier]
            terminalreporter.write_line(f"{tier:>5}: {last - first:7.1f} s from its first test to its last "
                                        f"({time.strftime('%H:%M:%S', time.localtime(first))}-"
                                        f"{time.strftime('%H:%M:%S', time.localtime(last))}), "
                                        f"{busy:7.1f} s of tests")
    for name, (first, last, busy) in sorted(_workers.items()):
        terminalreporter.write_line(f"{name:>5}: worked {busy:7.1f} s, its last test ended at "
                                    f"{time.strftime('%H:%M:%S', time.localtime(last))}")
