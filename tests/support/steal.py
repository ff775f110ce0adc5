"""A host or vm test that failed while the hypervisor took this machine's CPU runs again (tests/conftest.py).

These tiers measure real links on this machine, whose CPU its hypervisor shares with other guests. On the CI host
of 2026-12-03 it took 21-48 % for an hour: every repetition of test_study_run's study was testbed-limited ("the
hypervisor took 38 % of this machine's CPU time"), a 10 Mbit/s line between SSH hosts carried 6.8, a 12 s run
outlived its 110 s timeout, and 16 tests failed that pass on a quiet host. A shaper whose CPU is elsewhere for
tens of milliseconds dequeues that much less; such a failure says nothing about the code.

So a test that failed while the hypervisor took STEAL or more of the CPU (read from /proc/stat over the attempt,
every phase) runs again, up to RERUNS more times while the worker's reruns stay within RERUN_BUDGET_S, each after
waiting (at most QUIET_WAIT_S) for a few seconds of steal below STEAL. A failure with less steal is final at once,
and so is the last attempt's whatever the steal: a test still fails on a host starved throughout, and every earlier
attempt's failure is shown beside its result.
"""
from __future__ import annotations

import time

from _pytest.runner import runtestprotocol

from ccrig.experiments.run.fidelity import STEAL_NOTED as STEAL, cpu_now, steal_since

RERUNS = 2
# a worker's reruns in all: CI has 90 minutes and the suite took 66 of them at 38 % steal; the guest tier's one
# test takes 12 minutes, and three of it would take the rest
RERUN_BUDGET_S = 900.0
QUIET_WINDOW_S = 5.0
QUIET_WAIT_S = 120.0     # a spell of steal lasts seconds to many minutes: wait a little, not for the spell's end
_spent = [0.0]          # this worker's seconds of reruns so far (each a process of its own under xdist)
KEY = "steal_reruns"     # in a report's user_properties: each failed attempt (xdist carries it to the controller)


def wait_for_quiet(window_s: float = QUIET_WINDOW_S, most_s: float = QUIET_WAIT_S) -> None:
    """Sample the steal over windows of window_s until one is below STEAL or most_s have passed. Not the run's
    burn probe (experiments/run/steal.py): it would take both cores from the other worker's test for its time."""
    deadline = time.monotonic() + most_s
    while True:
        start = cpu_now()
        time.sleep(window_s)
        steal = steal_since(start)
        if steal is None or steal < STEAL or time.monotonic() >= deadline:
            return


def _rearm_timeout(item) -> None:
    """pytest-timeout's timer covers the whole protocol (timeout = 600 in pyproject.toml): each attempt gets its
    own, or a rerun would be cut short by its first attempt's time."""
    import pytest_timeout
    hooks = item.config.pluginmanager.hook
    settings = pytest_timeout._get_item_settings(item)
    if settings.timeout and settings.func_only is False:
        hooks.pytest_timeout_cancel_timer(item=item)
        hooks.pytest_timeout_set_timer(item=item, settings=settings)


def protocol(item, nextitem) -> bool:
    """pytest's runtest protocol (setup, call, teardown, their reports logged once) with reruns under steal."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    failed: list[dict] = []
    for attempt in range(1, RERUNS + 2):
        start, began = cpu_now(), time.monotonic()
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        steal, took = steal_since(start), time.monotonic() - began
        bad = [r for r in reports if r.failed]
        if not bad or steal is None or steal < STEAL or attempt == RERUNS + 1 or _spent[0] + took > RERUN_BUDGET_S:
            break
        _spent[0] += took
        failed.append({"attempt": attempt, "steal": round(steal, 3), "when": bad[0].when,
                       "failure": bad[0].longreprtext[-3000:]})
        wait_for_quiet()
        _rearm_timeout(item)
    for report in reports:
        if failed:
            report.user_properties.append((KEY, failed))
            for f in failed:
                report.sections.append((f"attempt {f['attempt']} failed while the hypervisor took "
                                        f"{f['steal']:.0%} of the CPU", f["failure"]))
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


_reran: dict[str, list] = {}   # on the controller: each test that ran again, its failed attempts, its last outcome


def note(report) -> None:
    """Keep a test's failed attempts (from any phase's report, a worker's too) and whether its last failed."""
    failed = dict(report.user_properties).get(KEY)
    if failed:
        _reran.setdefault(report.nodeid, [failed, False])[1] |= report.failed


def summary(terminalreporter) -> None:
    """One line per test that ran again: each failed attempt's phase and steal, and how its last ended."""
    if not _reran:
        return
    terminalreporter.section("ran again: failed while the hypervisor took the CPU (tests/support/steal.py)")
    for nodeid, (failed, last_failed) in _reran.items():
        attempts = ", ".join(f"attempt {f['attempt']} failed ({f['when']}) with {f['steal']:.0%} stolen"
                             for f in failed)
        terminalreporter.write_line(f"{nodeid}: {attempts}; attempt {len(failed) + 1} "
                                    f"{'failed' if last_failed else 'passed'}")
