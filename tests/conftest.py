"""Test tiers: unit (pure), host (root, the running kernel), vm (a distribution kernel under virtme-ng).

In CI (CI=true) a skip is a failure: nothing may be skipped for lack of something `make deps` installs.
"""
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI, which counts as a failure: {reason}"
