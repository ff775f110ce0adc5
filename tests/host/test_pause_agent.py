"""Node 1's PAUSE agent (`python -m ccrig.topologies.pause.agent obey`), as the hosts testbed runs it on n1's host:
a real tbf on a real interface, real datagrams, from node 2's address and from elsewhere."""
import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict

import pytest

from conftest import veth_namespace
from ccrig.commands import Commands
from ccrig.topologies.pause.agent.config import EmulatedPauseConfig
from ccrig.topologies.pause.agent.rtnl import in_namespace
from support import wait
from support.interrupt import terminated

AGENT, NODE2, STRAY = "198.19.250.1", "198.19.250.2", "198.19.250.3"
RATE_BPS = 8_000_000


@pytest.fixture
def link():
    """Link B in one namespace: the agent's end (ccAa, tbf at μ1) and node 2's (ccAb, plus a stray address)."""
    ns = f"ccA-ag-{os.getpid()}"
    with veth_namespace(ns, "ccAa", "ccAb", up=True) as c:
        c.run(["ip", "-n", ns, "link", "set", "lo", "up"])   # both ends' addresses are local: via lo
        for dev, addrs in (("ccAa", [AGENT]), ("ccAb", [NODE2, STRAY])):
            for a in addrs:
                c.run(["ip", "-n", ns, "addr", "add", f"{a}/24", "dev", dev])
        cfg = EmulatedPauseConfig(down_dev="ccAb", up_dev="ccAa", high=5, low=3, rate_bps=RATE_BPS, paused_bps=0,
                                  up_limit=10, down_limit=20, departure_pps=100, signal_to=AGENT,
                                  signal_from=NODE2)
        for argv in cfg.tbf_argv(cfg.rate_bps):
            c.run(argv, ns=ns)
        yield ns, c, cfg


def tbf_rate(c: Commands, ns: str) -> int:
    """The rate of ccAa's tbf in bytes/s, as the kernel has it."""
    q = next(q for q in json.loads(c.run(["tc", "-j", "qdisc", "show", "dev", "ccAa"], ns=ns).stdout) if q.get("root"))
    assert q["kind"] == "tbf", q
    return q["options"]["rate"]


def send(ns: str, source: str, port: int, text: bytes) -> None:
    with in_namespace(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with s:
        s.bind((source, 0))
        s.sendto(text, (AGENT, port))


def wait_rate(c, ns, want, timeout=10.0):
    wait.until(lambda: tbf_rate(c, ns) == want, timeout, f"link B's tbf at {want} bit/s")


def test_agent_obeys_node_2_only_and_leaves_the_link_at_mu1(link):
    ns, c, cfg = link
    assert tbf_rate(c, ns) == RATE_BPS // 8
    agent = c.popen([sys.executable, "-m", "ccrig.topologies.pause.agent", "obey", json.dumps(asdict(cfg))], ns=ns,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with terminated(agent, timeout=10) as ended:
        line = agent.stdout.readline()
        while not line.startswith(b"{"):   # runpy's warning about `-m` of an imported package's module
            assert line, "the agent ended without a word"
            line = agent.stdout.readline()
        ready = json.loads(line)
        assert ready["ready"] and ready["port"] > 0, ready
        port = ready["port"]
        send(ns, NODE2, port, b"1 0")                       # XOFF from node 2: μ2 = 0
        wait_rate(c, ns, 1)                                  # 1 byte/s: tbf stopped (rtnl.change_tbf)
        send(ns, STRAY, port, f"2 {RATE_BPS}".encode())      # anyone else: ignored, link B stays paused
        send(ns, NODE2, port, b"1 0")                       # a repeat of the rate in force: nothing to do
        send(ns, NODE2, port, b"nonsense")
        send(ns, NODE2, port, f"3 {RATE_BPS // 2}".encode())  # the next rate from node 2
        wait_rate(c, ns, RATE_BPS // 16)
    out = ended.out
    final = json.loads(out.splitlines()[-1])["agent"]
    assert (final["signals"], final["foreign"], final["applied"]) == (4, 1, 2), final
    assert tbf_rate(c, ns) == RATE_BPS // 8                # SIGTERM: link B back at μ1
