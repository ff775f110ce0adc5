"""tests/support/steal.py: a failure while the hypervisor took the CPU runs again; any other failure is final.

An inner pytest session (its own process, one xdist worker, so a report crosses to the controller as in CI) wires
the same hooks as tests/conftest.py; the steal each attempt read is given to it, since no test can make a
hypervisor take CPU time."""
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import os, sys
sys.path.insert(0, {str(SUPPORT)!r})
from support import steal

readings = iter(float(s) for s in os.environ["STEALS"].split(","))
steal.steal_since = lambda start: next(readings)
steal.wait_for_quiet = lambda: None
steal.RERUN_BUDGET_S = float(os.environ.get("RERUN_BUDGET_S", "900"))


def pytest_runtest_protocol(item, nextitem):
    return steal.protocol(item, nextitem)


def pytest_runtest_logreport(report):
    steal.note(report)


def pytest_terminal_summary(terminalreporter):
    steal.summary(terminalreporter)
"""

TESTS = """
import pytest
from pathlib import Path

calls = Path(__file__).with_name("calls")
made = Path(__file__).with_name("made")


@pytest.fixture(scope="module")
def shared():
    made.write_text(made.read_text() + "x" if made.exists() else "x")
    return 1


def test_flaky(shared):
    calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
    assert len(calls.read_text()) >= int(__import__("os").environ["PASS_AT"]), "the link carried 6.8 of 10"


def test_after(shared):
    assert shared == 1
"""


def _session(tmp_path: Path, steals: str, pass_at: int, budget_s: float = 900
             ) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TESTS)
    env = {**os.environ, "STEALS": steals, "PASS_AT": str(pass_at), "CI": "", "RERUN_BUDGET_S": str(budget_s)}
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", "-p",
                          "no:randomly", "-o", "timeout=0", "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return got, tmp_path


def _calls(tmp_path: Path) -> int:
    return len((tmp_path / "calls").read_text())


def test_a_failure_under_steal_runs_again_and_its_pass_counts_with_the_first_failure_shown(tmp_path):
    got, d = _session(tmp_path, "0.30,0.00,0.00", pass_at=2)
    assert got.returncode == 0, got.stdout + got.stderr
    assert _calls(d) == 2
    assert "2 passed" in got.stdout
    assert "test_inner.py::test_flaky: attempt 1 failed (call) with 30% stolen; attempt 2 passed" in got.stdout
    # the module's fixture was made once: the rerun kept it (its next test is in the same module)
    assert (d / "made").read_text() == "x"


def test_a_failure_without_steal_is_final_at_once(tmp_path):
    got, d = _session(tmp_path, "0.04,0.00", pass_at=2)
    assert got.returncode == 1
    assert _calls(d) == 1
    assert "1 failed, 1 passed" in got.stdout and "ran again" not in got.stdout


def test_no_rerun_once_the_workers_rerun_budget_is_spent(tmp_path):
    got, d = _session(tmp_path, "0.30,0.00", pass_at=2, budget_s=0)
    assert got.returncode == 1 and _calls(d) == 1 and "ran again" not in got.stdout


def test_a_host_starved_throughout_still_fails_with_every_attempt_shown(tmp_path):
    got, d = _session(tmp_path, "0.30,0.25,0.40,0.00", pass_at=9)
    assert got.returncode == 1
    assert _calls(d) == 3   # RERUNS more, no further
    assert ("attempt 1 failed (call) with 30% stolen, attempt 2 failed (call) with 25% stolen; attempt 3 failed"
            in got.stdout)
    # the earlier attempts' failures are printed beside the last one's
    assert "attempt 1 failed while the hypervisor took 30% of the CPU" in got.stdout
    assert got.stdout.count("the link carried 6.8 of 10") >= 3


def test_a_claim_the_machine_starved_is_kept_for_not_judged_and_any_other_miss_fails():
    sys.path.insert(0, str(SUPPORT))
    import pytest
    from support.machine import again_while_busy, verdict
    steal = ("fidelity testbed-limited: the bottleneck held packets but dequeued 0.76 of its configured rate; the "
             "hypervisor took 48% of this machine's CPU time (steal): other guests on its host, not this run's load")
    starved = []
    assert verdict({"id": "a", "verdict": "holds"}, "holds", starved) and starved == []
    assert not verdict({"id": "a", "verdict": "undecided", "excluded": [{"reason": steal}]}, "holds", starved)
    assert starved == [f"a: undecided, 1 repetition(s) left out, the first: {steal}"]
    for wrong in ({"id": "b", "verdict": "fails", "excluded": [{"reason": steal}]},     # a verdict, not a lack
                  {"id": "c", "verdict": "undecided", "excluded": []},                   # nothing left out
                  {"id": "d", "verdict": "not-applicable", "excluded": [
                      {"reason": "fidelity testbed-limited: delay line d1->n2: its frames left 1.7 ms late"}]}):
        with pytest.raises(AssertionError):
            verdict(wrong, "holds", starved)
    # a machine busy in every try ends the test as not judged (xfailed), with the last reason
    tries = []
    with pytest.raises(pytest.xfail.Exception, match=r"not judged: .*3 tries, the last: 40% late"):
        again_while_busy(lambda: tries.append(1) or len(tries), lambda n: "40% late", tries=3, pause_s=0)
    assert len(tries) == 3
    assert again_while_busy(lambda: 5, lambda n: None) == 5
