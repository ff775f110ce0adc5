"""Fixtures for tests that run inside the vm guest (tests/vm/test_vm_tier.py boots it and runs this folder).

Every test here is marked `vm` and runs only inside the guest; on the host it is skipped with a pointer to the
tier. The guest is fresh at every boot: the modules the tier needs are loaded once per session, and the
namespaces a test makes are still removed, so tests do not see each other's leftovers.
"""
from __future__ import annotations

import platform

import pytest

from ccrig.commands import Commands
from ccrig.topologies.testbeds.vm import in_guest

# the kernel features the vm tier exists for (docs/architecture.md: absent on this machine's kernel, modules in the guest)
QDISC_MODULES = {"netem": "sch_netem", "fq": "sch_fq", "red": "sch_red", "sfq": "sch_sfq", "drr": "sch_drr",
                 "fq_codel": "sch_fq_codel", "codel": "sch_codel", "pie": "sch_pie"}
OTHER_MODULES = ["openvswitch", "tcp_vegas", "veth"]


def pytest_collection_modifyitems(config, items):
    inside = in_guest()
    for item in items:
        item.add_marker(pytest.mark.vm)
        if not inside:
            item.add_marker(pytest.mark.skip(reason="runs inside the vm guest only: run tests/vm/test_vm_tier.py "
                                                    "(CCRIG_GUEST_PYTEST_ARGS selects guest tests)"))


def pytest_generate_tests(metafunc):
    if "qdisc_kind" in metafunc.fixturenames:
        metafunc.parametrize("qdisc_kind", sorted(QDISC_MODULES))


@pytest.fixture(scope="session")
def commands() -> Commands:
    return Commands(None)


@pytest.fixture(scope="session")
def modprobe(commands):
    """modprobe(*modules): loads kernel modules, failing the test with modprobe's own message if one is
    missing from this kernel."""
    def load(*modules: str) -> None:
        for m in modules:
            r = commands.run(["modprobe", m], check=False)
            if r.returncode != 0:
                pytest.fail(f"modprobe {m} failed on {platform.release()}: {(r.stderr or r.stdout).strip()}")
    return load


@pytest.fixture(scope="session")
def tier_modules(modprobe):
    """Loads every module the tier is about, once."""
    modprobe(*QDISC_MODULES.values(), *OTHER_MODULES)
    return [*QDISC_MODULES.values(), *OTHER_MODULES]


class NsPair:
    """Two network namespaces a and b joined by a veth pair (a: 10.9.0.1/24 on `va`, b: 10.9.0.2/24 on `vb`)."""

    def __init__(self, commands: Commands, prefix: str):
        self.commands = commands
        self.a, self.b = f"{prefix}a", f"{prefix}b"
        self.addr_a, self.addr_b = "10.9.0.1", "10.9.0.2"

    def up(self) -> "NsPair":
        c = self.commands
        for ns in (self.a, self.b):
            c.run(["ip", "netns", "add", ns])
            c.run(["ip", "link", "set", "lo", "up"], ns=ns)
        c.run(["ip", "link", "add", "va", "netns", self.a, "type", "veth", "peer", "name", "vb", "netns", self.b])
        for ns, dev, addr in ((self.a, "va", self.addr_a), (self.b, "vb", self.addr_b)):
            c.run(["ip", "addr", "add", f"{addr}/24", "dev", dev], ns=ns)
            c.run(["ip", "link", "set", dev, "up"], ns=ns)
        return self

    def down(self) -> None:
        for ns in (self.a, self.b):
            self.commands.ok(["ip", "netns", "del", ns])


def _pair(commands, key: str):
    pair = NsPair(commands, f"ccrig-vmt{abs(hash(key)) % 10000}")
    try:
        yield pair.up()
    finally:
        pair.down()


@pytest.fixture
def ns_pair(commands, request):
    """A fresh pair of namespaces for one test, removed afterwards."""
    yield from _pair(commands, request.node.nodeid)


@pytest.fixture(scope="module")
def ns_pair_shared(commands, request):
    """One pair for a whole test module (each setup costs seconds of emulated CPU): tests that use it leave
    the pair as they found it, or replace what they change (`tc qdisc replace`)."""
    yield from _pair(commands, request.node.nodeid)
