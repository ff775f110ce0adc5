"""Orchestration asks the testbed: the modules of experiments/ reach a testbed through the registry
(testbeds.get(kind)) and the hooks of topologies/testbed.py, never by its name or its module; and the hooks'
defaults are what a testbed of this machine needs."""
import ast
from pathlib import Path

import pytest

from ccrig.commands import Commands
from ccrig.topologies import testbeds
from ccrig.topologies.testbed import Testbed

ROOT = Path(__file__).resolve().parents[2]
# the runner until the repetition code that replaces it calls the hooks; provisioning, whose subject is the
# hosts testbed's machines (Ansible over its inventory)
EXEMPT = {ROOT / "experiments" / "provision" / "playbooks.py"}
NAMING = ("testbeds.hosts", "testbeds.vm", "testbeds.netns", "testbeds.mininet",
          'get("vm")', 'get("hosts")', "get('vm')", "get('hosts')")


def sources() -> list[Path]:
    return [p for p in sorted((ROOT / "experiments").rglob("*.py")) if p not in EXEMPT]


def test_no_module_of_experiments_names_a_testbed_module():
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in sources()
           for i, line in enumerate(p.read_text().splitlines(), 1) if any(n in line for n in NAMING)]
    assert not bad, bad


def test_no_orchestration_module_spells_a_testbed_kind():
    """A testbed's kind as a string in code (not prose: docstrings are left alone) means a decision made by
    name; the run's orchestration asks the class instead."""
    kinds = set(testbeds.kinds())
    bad = []
    for p in sources():
        if p.parent.name != "run":
            continue
        tree = ast.parse(p.read_text())
        prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        bad += [f"{p.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and n.value in kinds and id(n) not in prose]
    assert not bad, bad


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The two scans above would see a module that named a testbed (so their silence means something)."""
    assert any(n in 'bed = testbeds.get("vm")' for n in NAMING)
    tree = ast.parse('"""netns in prose"""\nif kind == "vm":\n    pass\n')
    prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in testbeds.kinds()
             and id(n) not in prose]
    assert found == ["vm"]


def test_a_testbed_of_this_machine_loads_laws_here_and_runs_specs_here():
    netns = testbeds.get("netns")
    with netns.law_systems(["s1", "s2"], Commands(None), "cchk-unit") as systems:
        assert systems == {None: None}
    assert netns.clean_everywhere(Commands(None), "cchk-unit-", Path("/no/such/inventory"), lambda p: False) == []
    with pytest.raises(NotImplementedError, match="netns testbed runs specs in this process"):
        netns.run_specs_elsewhere(["run"], Path("/nonexistent"), None, 1, "cchk-unit")
    assert not netns.elsewhere and netns.inner is None


def test_a_testbed_that_runs_elsewhere_says_what_runs_there():
    for kind, cls in testbeds.available().items():
        if cls.elsewhere:
            assert cls.inner in testbeds.available() and not testbeds.get(cls.inner).elsewhere, kind
            assert cls.run_specs_elsewhere.__func__ is not Testbed.run_specs_elsewhere.__func__, kind
    assert testbeds.get(testbeds.AUTO_ELSEWHERE).elsewhere and not testbeds.get(testbeds.AUTO_HERE).elsewhere
    assert testbeds.of("auto") is testbeds.get(testbeds.AUTO_HERE)


def test_the_hosts_testbed_cleans_nothing_elsewhere_without_an_inventory():
    assert testbeds.get("hosts").clean_everywhere(Commands(None), "cchk-unit-", None, lambda p: False) == []
